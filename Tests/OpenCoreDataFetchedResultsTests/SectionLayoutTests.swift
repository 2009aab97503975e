import Foundation
import Testing

@testable import OpenCoreDataFetchedResults

/// The section layout maps result indexes to index paths and keeps names, counts and starts consistent.
@Suite struct SectionLayoutTests {
    @Test func rowsComeAndGoAndSectionsWithThem() {
        var layout = SectionLayout(names: ["A", "B", "C"], counts: [2, 1, 3])
        layout._checkInvariants()
        #expect(layout.names == ["A", "B", "C"] && layout.counts == [2, 1, 3] && layout.rowCount == 6)
        #expect(layout.indexPath(forIndex: 3) == IndexPath(row: 0, section: 2))
        #expect(layout.index(forIndexPath: IndexPath(row: 2, section: 2)) == 5)
        #expect(layout.index(forIndexPath: IndexPath(row: 3, section: 2)) == nil)
        #expect(layout.index(forIndexPath: IndexPath(row: 0, section: 3)) == nil)

        layout.removeRow(at: 2)  // B's only row: B goes
        layout._checkInvariants()
        #expect(layout.names == ["A", "C"] && layout.counts == [2, 3])
        // A new section between A and C; a row of A at its end; a second "A" section, a new section inside C and a
        // second "A" after C are refused. The layout itself knows the sections on either side of an index.
        let inserted = [
            layout.insertRow(at: 2, name: "Bb"), layout.insertRow(at: 2, name: "A"), layout.insertRow(at: 6, name: "A"),
            layout.insertRow(at: 5, name: "Z"), layout.insertRow(at: 7, name: "A"),
        ]
        #expect(inserted == [true, true, false, false, false])
        #expect((0..<7).map(layout.sectionName(ofRowAt:)) == ["A", "A", "A", "Bb", "C", "C", "C"])
        layout._checkInvariants()
        #expect(layout.names == ["A", "Bb", "C"] && layout.counts == [3, 1, 3] && layout.rowCount == 7)
        #expect(layout == SectionLayout(names: ["A", "Bb", "C"], counts: [3, 1, 3]))
    }
}
