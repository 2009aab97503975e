import Foundation
import OpenCoreData

extension NSManagedObjectModel {
    /// Loads a model file as Apple's `NSManagedObjectModel(contentsOf:)` does: nil when the file cannot be read as a
    /// model.
    ///
    /// For example:
    /// ```swift
    /// guard let model = NSManagedObjectModel(contentsOf: url) else { fatalError("no model at \(url)") }
    /// ```
    /// Use `try NSManagedObjectModel(contentsOf:)` from `OpenCoreData` to learn why a file does not load (it throws
    /// an error naming the file, line and element); here that error is dropped, as Apple's signature drops it.
    public convenience init?(contentsOf url: URL) {
        self.init()
        do {
            try load(contentsOf: url)
        } catch {
            return nil
        }
    }
}
