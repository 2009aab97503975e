import Foundation
import OpenCoreData
import Testing
import _TestSupport

@testable import OpenCoreDataFetchedResults

/// The bulk route skips the touched-rows dictionary for rows the filter rules out: a key the filter wrongly ruled out
/// would be a touched row left where it was (its move or delete never reported), so it must never say "no" to a member.
@Suite struct PackedKeyFilterTests {
    @Test func neverRulesOutAMemberAndRulesOutMostOthers() throws {
        let seed = ProcessInfo.processInfo.environment["OCD_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 0...UInt64.max)
        var random = SeededGenerator(seed: seed)
        for _ in 0..<50 {
            let count = Int.random(in: 0...2_000, using: &random)
            var members = Set<RowKey>()
            while members.count < count {
                members.insert(
                    .stored(entity: Int32.random(in: 1...3, using: &random), primaryKey: Int64.random(in: 1...50_000, using: &random)))
            }
            let filter = PackedKeyFilter(members, count: members.count)
            for key in members {
                guard case .stored(let entity, let primaryKey) = key else { continue }
                let packed = try #require(ResultRow.pack(entity: entity, primaryKey: primaryKey))
                #expect(filter.mayContain(packedKey: packed), "a member ruled out, seed \(seed)")
            }
            // Keys that do not pack are never ruled out.
            #expect(filter.mayContain(packedKey: ResultRow.unsavedTag) && filter.mayContain(packedKey: ResultRow.wideTag), "seed \(seed)")
            // Others: at eight bits a key, well under a third come out "maybe".
            var maybe = 0
            let others = (0..<4_000).map { _ in
                RowKey.stored(
                    entity: Int32.random(in: 1...3, using: &random), primaryKey: Int64.random(in: 50_001...1_000_000, using: &random))
            }
            for case .stored(let entity, let primaryKey) in others {
                let packed = try #require(ResultRow.pack(entity: entity, primaryKey: primaryKey))
                if filter.mayContain(packedKey: packed) { maybe += 1 }
            }
            #expect(maybe < others.count / 3, "\(maybe) of \(others.count) non-members not ruled out, seed \(seed)")
        }
    }
}
