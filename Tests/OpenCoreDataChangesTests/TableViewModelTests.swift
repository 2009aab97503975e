import Foundation
@_spi(Engine) import OpenCoreDataChanges
import OpenCoreDataTesting
import Testing

@Suite struct TableViewModelTests {
    func table() -> TableViewModel<String> {
        TableViewModel(SectionedItems([.init(name: "A", items: ["a1", "a2", "a3"]), .init(name: "B", items: ["b1", "b2"])])) { $0 }
    }

    func p(_ s: Int, _ r: Int) -> IndexPath { IndexPath(row: r, section: s) }

    @Test func appliesAValidBatch() throws {
        let t = table()
        let batch = ChangeBatch<String>(
            sections: [SectionChange(.insert, index: 0, name: "0")],
            rows: [
                RowChange(.delete, id: "a2", from: p(0, 1), to: nil), RowChange(.insert, id: "new", from: nil, to: p(0, 0)),
                RowChange(.move, id: "b2", from: p(1, 1), to: p(1, 0)), RowChange(.update, id: "a1", from: p(0, 0), to: p(1, 1)),
            ])
        try t.apply(batch) { $0 + "'" }
        #expect(t.items.sections.map(\.name) == ["0", "A", "B"])
        #expect(t.items.sections.map(\.items) == [["new"], ["b2", "a1", "a3"], ["b1"]])
        #expect(t.contents[1] == ["b2'", "a1'", "a3"], "moved and reloaded rows are re-rendered, others keep their text")
    }

    @Test(arguments: [
        (
            "delete out of range", ChangeBatch<String>(rows: [RowChange(.delete, id: "x", from: IndexPath(row: 5, section: 0), to: nil)]),
            "out of range"
        ),
        (
            "deleted twice",
            ChangeBatch<String>(rows: [
                RowChange(.delete, id: "a1", from: IndexPath(row: 0, section: 0), to: nil),
                RowChange(.delete, id: "a1", from: IndexPath(row: 0, section: 0), to: nil),
            ]), "deleted twice"
        ),
        (
            "reload of deleted",
            ChangeBatch<String>(rows: [
                RowChange(.delete, id: "a1", from: IndexPath(row: 0, section: 0), to: nil),
                RowChange(.update, id: "a1", from: IndexPath(row: 0, section: 0), to: nil),
            ]), "reload row"
        ),
        (
            "move from deleted section",
            ChangeBatch<String>(
                sections: [SectionChange(.delete, index: 1, name: "B")],
                rows: [RowChange(.move, id: "b1", from: IndexPath(row: 0, section: 1), to: IndexPath(row: 0, section: 0))]), "being deleted"
        ),
        (
            "move into inserted section",
            ChangeBatch<String>(
                sections: [SectionChange(.insert, index: 2, name: "C")],
                rows: [RowChange(.move, id: "a1", from: IndexPath(row: 0, section: 0), to: IndexPath(row: 0, section: 2))]),
            "being inserted"
        ),
        (
            "insert past the end", ChangeBatch<String>(rows: [RowChange(.insert, id: "z", from: nil, to: IndexPath(row: 7, section: 1))]),
            "invalid number of rows"
        ),
        ("section out of range", ChangeBatch<String>(sections: [SectionChange(.delete, index: 4, name: "?")]), "section delete at 4"),
        (
            "delete and move",
            ChangeBatch<String>(rows: [
                RowChange(.delete, id: "a1", from: IndexPath(row: 0, section: 0), to: nil),
                RowChange(.move, id: "a1", from: IndexPath(row: 0, section: 0), to: IndexPath(row: 0, section: 1)),
            ]), "delete and move"
        ),
    ])
    func rejectsWhatUIKitRejects(_ name: String, _ batch: ChangeBatch<String>, _ expected: String) {
        let error = #expect(throws: TableViewBatchError.self) { try table().apply(batch) { $0 } }
        #expect(error?.message.contains(expected) == true, "\(name): \(error?.message ?? "no error")")
    }

    @Test func checksCountsAgainstTheDataSource() {
        let t = table()
        let after = SectionedItems<String>([.init(name: "A", items: ["a1", "a2", "a3", "x"]), .init(name: "B", items: ["b1", "b2"])])
        let error = #expect(throws: TableViewBatchError.self) { try t.apply(ChangeBatch(), dataSource: after) { $0 } }
        #expect(error?.message.contains("invalid number of rows in section 0") == true)
    }

    @Test func builderMakesDeletePlusInsertAcrossNewSections() throws {
        // "a1" leaves section A (which empties and is deleted) for a new section C.
        let batch = BatchBuilder.batch(
            sectionsBefore: ["A", "B"], sectionsAfter: ["B", "C"],
            items: [
                ItemMovement(
                    id: "a1", before: IndexPath(row: 0, section: 0), after: IndexPath(row: 0, section: 1), keysChanged: true,
                    contentChanged: true)
            ])
        #expect(batch.sections == [SectionChange(.delete, index: 0, name: "A"), SectionChange(.insert, index: 1, name: "C")])
        #expect(batch.rows.map(\.type) == [.delete, .insert])
        let t = TableViewModel(SectionedItems([.init(name: "A", items: ["a1"]), .init(name: "B", items: ["b1"])])) { $0 }
        try t.apply(batch) { $0 }
        #expect(t.items.sections.map(\.items) == [["b1"], ["a1"]])
    }

    @Test func builderMovesAKeyChangedRowThatKeepsItsIndexWhenNeighboursChange() throws {
        // [x, y, z]: x is deleted, w is inserted at the end, and y's key changes so that it now sorts after z:
        // y is at index 1 both before and after, but its neighbours changed, so it must be moved.
        let batch = BatchBuilder.batch(
            sectionsBefore: [""], sectionsAfter: [""],
            items: [
                ItemMovement(id: "x", before: IndexPath(row: 0, section: 0), after: nil, keysChanged: false, contentChanged: false),
                ItemMovement(
                    id: "y", before: IndexPath(row: 1, section: 0), after: IndexPath(row: 1, section: 0), keysChanged: true,
                    contentChanged: true),
                ItemMovement(id: "w", before: nil, after: IndexPath(row: 2, section: 0), keysChanged: false, contentChanged: false),
            ])
        let t = TableViewModel(SectionedItems([.init(name: "", items: ["x", "y", "z"])])) { $0 }
        try t.apply(batch) { $0 }
        #expect(t.items.allItems == ["z", "y", "w"])
        #expect(batch.rows.contains { $0.type == .move && $0.id == "y" })
    }
}
