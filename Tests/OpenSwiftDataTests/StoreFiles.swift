import Foundation
import GRDB

/// The store file at `url`, opened with GRDB to look at what a container wrote.
///
/// Waits for a lock instead of failing at once: the container that wrote the file may still be closing it on another
/// thread (an autosave an insert scheduled holds its context, and so the container, until it runs; under load the
/// read came first and failed with "database is locked").
func storeFile(_ url: URL) throws -> DatabaseQueue {
    var configuration = Configuration()
    configuration.busyMode = .timeout(10)
    return try DatabaseQueue(path: url.path, configuration: configuration)
}
