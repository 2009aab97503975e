import Foundation

extension NSManagedObjectModel {
    /// The model bundle a model file belongs to: the file itself when it is an `.xcdatamodeld` or `.momd`, its
    /// folder when it is one version inside such a bundle, else nil.
    static func bundle(containing url: URL) -> URL? {
        let bundles: Set<String> = ["xcdatamodeld", "momd"]
        if bundles.contains(url.pathExtension.lowercased()) { return url.standardizedFileURL }
        let parent = url.standardizedFileURL.deletingLastPathComponent()
        return bundles.contains(parent.pathExtension.lowercased()) ? parent : nil
    }

    /// The versions of a model: every `.xcdatamodel` of an `.xcdatamodeld` bundle, every `.mom` of a compiled
    /// `.momd`, in name order; a single `.xcdatamodel` or `.mom` is its own only version.
    ///
    /// For example:
    /// ```swift
    /// for version in NSManagedObjectModel.versionURLs(ofModelAt: bundleURL) { print(version.lastPathComponent) }
    /// ```
    public static func versionURLs(ofModelAt url: URL) -> [URL] {
        let suffix: String
        switch url.pathExtension.lowercased() {
        case "xcdatamodeld": suffix = ".xcdatamodel"
        case "momd": suffix = ".mom"
        default: return [url]
        }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return names.filter { $0.lowercased().hasSuffix(suffix) }.sorted().map { url.appendingPathComponent($0) }
    }

    /// The version of the model bundle at `url` that wrote a store, or nil when none did.
    ///
    /// That version's entity version hashes are those in the store's `metadata` (as
    /// `isConfiguration(withName:compatibleWithStoreMetadata:)` decides). Versions that do not load are passed over.
    ///
    /// For example:
    /// ```swift
    /// let metadata = try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: storeURL)
    /// let source = try NSManagedObjectModel.version(inBundleAt: bundleURL, forStoreMetadata: metadata)
    /// ```
    public static func version(inBundleAt url: URL, forStoreMetadata metadata: [String: Any]) -> NSManagedObjectModel? {
        guard let hashes = metadata["NSStoreModelVersionHashes"] as? [String: Data] else { return nil }
        return version(inBundleAt: url, withVersionHashes: hashes)
    }

    /// The version of the model bundle at `url` whose entity version hashes are `hashes`, or nil.
    package static func version(inBundleAt url: URL, withVersionHashes hashes: [String: Data]) -> NSManagedObjectModel? {
        for version in versionURLs(ofModelAt: url) {
            guard let model = try? NSManagedObjectModel(contentsOf: version) else { continue }
            if model.entityVersionHashesByName == hashes { return model }
        }
        return nil
    }

    /// Core Data's search for the model that wrote a store: every model in the bundles' resources (`.xcdatamodeld`,
    /// `.momd`, `.xcdatamodel`, `.mom`; `Bundle.main` when `bundles` is nil), every version of each, the first
    /// compatible with `metadata`; nil when none is.
    ///
    /// For example:
    /// ```swift
    /// let source = NSManagedObjectModel.mergedModel(from: [Bundle.module], forStoreMetadata: metadata)
    /// ```
    /// Apple's form merges matching models of several bundles into one; here the models of one app are expected to
    /// be one model family, and the first matching version is returned.
    public static func mergedModel(from bundles: [Bundle]?, forStoreMetadata metadata: [String: Any]) -> NSManagedObjectModel? {
        let modelExtensions: Set<String> = ["xcdatamodeld", "momd", "xcdatamodel", "mom"]
        for bundle in bundles ?? [Bundle.main] {
            let folder = bundle.resourceURL ?? bundle.bundleURL
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).sorted()
            for name in names where modelExtensions.contains((name as NSString).pathExtension.lowercased()) {
                if let model = version(inBundleAt: folder.appendingPathComponent(name), forStoreMetadata: metadata) { return model }
            }
        }
        return nil
    }
}
