import OpenCoreDataModel

/// The rows a context has seen deleted from the store lately (merged from other writers or saved by itself), so that a
/// save whose notification arrives after a later delete of one of its rows does not bring the row back. (A delete a
/// child saved into its parent is not final, the parent can still undo it: those are not kept.)
///
/// A save commits, then tells its own observers, then posts `didSaveObjectsNotification`; under load another writer
/// can commit and announce a delete of the same row in between, and a context that merges both receives the delete
/// first. A row's key is never used again after its delete (Core Data's `Z_MAX` only grows, as PostgreSQL's
/// sequences do), so a merged insert or update of a row in this set is such a late arrival and is dropped.
///
/// Only the latest deletes matter (the window is the time between a commit and its notification): the set keeps two
/// generations of at most `generationSize` rows each and forgets the older when the newer fills, so a context that
/// merges millions of deletes holds a few thousand IDs.
struct RecentDeletions {
    static let generationSize = 4_096
    private var newer: Set<NSManagedObjectID> = []
    private var older: Set<NSManagedObjectID> = []

    mutating func insert(_ id: NSManagedObjectID) {
        if newer.count >= Self.generationSize {
            older = newer
            newer = []
        }
        newer.insert(id)
    }

    func contains(_ id: NSManagedObjectID) -> Bool {
        guard !newer.isEmpty else { return false }
        return newer.contains(id) || older.contains(id)
    }
}
