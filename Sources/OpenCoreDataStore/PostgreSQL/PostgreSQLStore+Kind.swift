import Foundation
import OpenCoreDataModel

extension StoreKind {
    /// A store on a PostgreSQL server (`postgresql://user@host:port/database`).
    package static let postgreSQL = StoreKind(
        type: NSPostgreSQLStoreType, usesFiles: false,
        open: { request in
            guard let url = request.url else {
                throw CoreDataError(.persistentStoreInvalidType, "A PostgreSQL store needs a URL: postgresql://user@host:port/database.")
            }
            return try PostgreSQLStore(
                url: url, model: request.model, readOnly: request.readOnly, timeout: max(request.timeout, 10),
                configurationName: request.configurationName, tracksHistory: request.tracksHistory)
        },
        metadata: { url in try PostgreSQLStore.metadata(at: url) },
        migrate: { url, model, source in try PostgreSQLStore.migrateStore(at: url, to: model, from: source).changes })

    /// Whether `url` names a PostgreSQL server (`postgresql://` or `postgres://`).
    package static func isPostgreSQL(_ url: URL?) -> Bool {
        guard let scheme = url?.scheme?.lowercased() else { return false }
        return scheme == "postgresql" || scheme == "postgres"
    }

    /// The kind a coordinator opens for `type` at `url`: a PostgreSQL URL opens a PostgreSQL store whatever the
    /// description's default type (`NSSQLiteStoreType`) says.
    package static func require(_ type: String, at url: URL?) throws -> StoreKind {
        if type == NSSQLiteStoreType, isPostgreSQL(url) { return postgreSQL }
        return try require(type)
    }
}
