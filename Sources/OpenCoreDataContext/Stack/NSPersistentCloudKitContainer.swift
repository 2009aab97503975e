import Foundation
import OpenCoreDataModel

/// A container that Core Data would mirror to CloudKit; on Linux, where there is no CloudKit, a local
/// ``NSPersistentContainer``: its stores open, save and track history as any container's do, and nothing syncs.
///
/// It lets an app's stack, written for Apple platforms with `NSPersistentCloudKitContainer` (as Xcode's Core Data +
/// CloudKit template writes it), build and run here with only its import changed: `cloudKitContainerOptions` on
/// store descriptions are kept and ignored, and ``initializeCloudKitSchema(options:)`` throws, saying why.
///
/// For example:
/// ```swift
/// let container = NSPersistentCloudKitContainer(name: "Groceries", managedObjectModel: model)
/// container.persistentStoreDescriptions.first?.cloudKitContainerOptions =
///     NSPersistentCloudKitContainerOptions(containerIdentifier: "iCloud.com.example.Groceries")
/// try container.loadPersistentStores()   // a local store; no sync
/// ```
open class NSPersistentCloudKitContainer: NSPersistentContainer, @unchecked Sendable {
    /// Core Data creates the CloudKit records of the model's entities in the development environment; there is no
    /// CloudKit on Linux, so this throws `CoreDataError(.persistentStoreOperation)` saying so (wrap it in `do`/`catch`
    /// or `try?`, as apps usually call it in debug builds only).
    open func initializeCloudKitSchema(options: NSPersistentCloudKitContainerSchemaInitializationOptions = []) throws {
        throw CoreDataError(
            .persistentStoreOperation,
            "CloudKit is not available on Linux: the container's stores are local, and there is no CloudKit schema to initialize.")
    }
}

/// Options of ``NSPersistentCloudKitContainer/initializeCloudKitSchema(options:)`` (accepted; there is no CloudKit on
/// Linux).
public struct NSPersistentCloudKitContainerSchemaInitializationOptions: OptionSet, Sendable {
    /// The raw value, as in Core Data.
    public let rawValue: UInt
    /// Options from their raw value.
    public init(rawValue: UInt) { self.rawValue = rawValue }
    /// Validate the model and create the records without uploading them.
    public static let dryRun = NSPersistentCloudKitContainerSchemaInitializationOptions(rawValue: 1 << 1)
    /// Print the schema created.
    public static let printSchema = NSPersistentCloudKitContainerSchemaInitializationOptions(rawValue: 1 << 2)
}

/// The CloudKit container a store would sync with (kept on its description; nothing syncs on Linux).
public final class NSPersistentCloudKitContainerOptions: @unchecked Sendable {
    /// The CloudKit container's identifier (`iCloud.com.example.App`).
    public let containerIdentifier: String

    /// Options for the CloudKit container named `containerIdentifier`.
    public init(containerIdentifier: String) {
        self.containerIdentifier = containerIdentifier
    }
}

extension NSPersistentStoreDescription {
    /// The CloudKit container Core Data would mirror this store to; kept and ignored on Linux (the store is local).
    public var cloudKitContainerOptions: NSPersistentCloudKitContainerOptions? {
        get { options[Self.cloudKitOptionsKey] as? NSPersistentCloudKitContainerOptions }
        set { setOption(newValue, forKey: Self.cloudKitOptionsKey) }
    }

    /// Where `cloudKitContainerOptions` is kept among the options (the store ignores it).
    static let cloudKitOptionsKey = "NSPersistentCloudKitContainerOptionsKey"
}
