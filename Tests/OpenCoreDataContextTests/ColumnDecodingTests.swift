import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate
import Testing

@testable import OpenCoreDataStore

/// The row query's direct column reads must give what decoding the stored value gives, for every storage class a
/// column can hold and every attribute type (a column may hold a value its declared type does not: SQLite is
/// dynamically typed, and other programs may write the file).
@Suite struct ColumnDecodingTests {
    @Test func directReadsAgreeWithDecodingForEveryStorageClassAndType() throws {
        let sql = "SELECT NULL, 0, 1, -7, 9007199254740993, 2.5, -0.0, 3.0, 1e300, 'text', '', '12.5', X'00FF', X''"
        let db = try DatabaseQueue()
        try db.read { db in
            let statement = try db.makeStatement(sql: sql)
            let cursor = try Row.fetchCursor(statement)
            _ = try #require(try cursor.next())
            let columns = StatementColumns(statement: statement.sqliteStatement)
            for index in 0..<statement.columnCount {
                for type in NSAttributeType.allCases {
                    let direct = columns.attributeValue(index, type: type)
                    let decoded = SQLStorage.decode(columns.value(index), as: type)
                    #expect(
                        direct == decoded,
                        "column \(index) as \(type): read \(String(describing: direct)), decoded \(String(describing: decoded))")
                    if case .double(let a) = direct, case .double(let b) = decoded {
                        #expect(a.bitPattern == b.bitPattern, "column \(index) as \(type): the same double, sign of zero included")
                    }
                }
            }
        }
    }
}
