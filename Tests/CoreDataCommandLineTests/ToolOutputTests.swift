import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

@testable import CoreDataCommandLine

/// What the tool prints: relationships in `fetch`, valid JSON (RFC 8259) from every command, dates to the fraction
/// of a second, and numeric options and paths that are refused by name.
@Suite struct ToolOutputTests {
    let dir = TemporaryDirectory()
    var model: String { Fixtures.url("Company.xcdatamodeld").path }

    /// Parses with the tool's own strict reader (no NaN, no trailing commas, no duplicate keys), which fails the test
    /// on anything RFC 8259 does not allow.
    static func strictJSON(_ text: String, _ what: String) throws -> Any {
        do { _ = try JSONReader.parse(Data(text.utf8)) } catch { throw Failure("\(what) is not valid JSON: \(error)\n\(text.prefix(400))") }
        return try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    func companyStore() throws -> String {
        let store = dir.file("company.sqlite").path
        let file = dir.file("company.json")
        try Data(
            #"""
            {"Department": [{"@id": "d1", "name": "Sales"}, {"@id": "d2", "name": "Empty"}],
             "Employee": [{"@id": "e1", "name": "Ann", "department": "d1", "salary": "Infinity", "rating": "Infinity"},
                          {"@id": "e2", "name": "Bob", "department": "d1", "salary": "-Infinity", "rating": 1.5,
                           "born": "2024-05-01T12:00:00.123456Z"}]}
            """#.utf8
        ).write(to: file)
        let r = coredata(["import", "--model", model, "--store", store, file.path])
        try #require(r.code == 0, "\(r.err)")
        return store
    }

    @Test func fetchShowsRelationshipsAsURIsOrCountsAndPrintsNonFiniteNumbersAsStrings() throws {
        let store = try companyStore()
        let r = coredata(["fetch", "--model", model, "--store", store, "--entity", "Department", "--sort", "name"])
        #expect(r.code == 0, "\(r.err)")
        let departments = try #require(try Self.strictJSON(r.out, "fetch") as? [[String: Any]])
        let employees = try #require(
            try Self.strictJSON(
                coredata(["fetch", "--model", model, "--store", store, "--entity", "Employee", "--sort", "name"]).out, "fetch")
                as? [[String: Any]])
        let employeeIDs = employees.compactMap { $0["objectID"] as? String }
        #expect(departments.map { $0["name"] as? String } == ["Empty", "Sales"])
        #expect((departments[0]["employees"] as? [Any])?.isEmpty == true, "a to-many with none is an empty array")
        #expect(departments[1]["employees"] as? [String] == employeeIDs, "its members' URIs, by primary key")
        #expect(departments[1]["head"] is NSNull, "a to-one with none is null")
        #expect(employees.allSatisfy { $0["department"] as? String == departments[1]["objectID"] as? String })
        // Non-finite doubles, as strings JSON can hold, and read back by import.
        #expect(employees[0]["salary"] as? String == "Infinity" && employees[0]["rating"] as? String == "Infinity")
        #expect(employees[1]["salary"] as? String == "-Infinity")
        #expect(employees[1]["born"] as? String == "2024-05-01T12:00:00.123456Z", "microseconds kept")
        // --properties selects relationships like attributes; the table shows Entity/pN and counts.
        let some = coredata([
            "fetch", "--model", model, "--store", store, "--entity", "Employee", "--sort", "name", "--properties", "name,department",
        ])
        let picked = try #require(try Self.strictJSON(some.out, "fetch --properties") as? [[String: Any]])
        #expect(Set(picked[0].keys) == ["entity", "objectID", "name", "department"])
        let table = coredata([
            "fetch", "--model", model, "--store", store, "--entity", "Department", "--sort", "name", "--format", "table", "--properties",
            "name,employees,head",
        ])
        #expect(table.code == 0, "\(table.err)")
        let lines = table.out.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        #expect(lines.first == ["entity", "name", "employees", "head"])
        #expect(
            lines.dropFirst(2).map { $0 } == [["Department", "Empty", "0", "nil"], ["Department", "Sales", "2", "nil"]], "\(table.out)")
        let employeeTable = coredata([
            "fetch", "--model", model, "--store", store, "--entity", "Employee", "--sort", "name", "--format", "table", "--properties",
            "name,department",
        ])
        let departmentPK = (departments[1]["objectID"] as? String)?.split(separator: "/").last.map(String.init) ?? "?"
        #expect(employeeTable.out.contains("Department/\(departmentPK)"), "\(employeeTable.out)")
        let unknown = coredata(["fetch", "--model", model, "--store", store, "--entity", "Employee", "--properties", "name,nope"])
        #expect(unknown.code == 1 && unknown.err.contains("'nope'") && unknown.err.contains("department"), "\(unknown.err)")

        // What fetch printed imports again, non-finite numbers included.
        let again = dir.file("again.json")
        let rows = employees.map { row in row.filter { ["name", "salary", "rating", "born"].contains($0.key) } }
        try JSONSerialization.data(withJSONObject: ["Employee": rows]).write(to: again)
        let copy = dir.file("copy.sqlite").path
        let imported = coredata(["import", "--model", model, "--store", copy, again.path])
        #expect(imported.code == 0, "\(imported.err)")
        let back = try #require(
            try Self.strictJSON(
                coredata(["fetch", "--model", model, "--store", copy, "--entity", "Employee", "--sort", "name"]).out, "fetch")
                as? [[String: Any]])
        for key in ["salary", "rating", "born"] {
            #expect(back.map { "\($0[key] ?? "")" } == employees.map { "\($0[key] ?? "")" }, "\(key)")
        }
    }

    @Test func nonFiniteNumbersArePrintedAsStringsAndReadBack() throws {
        #expect(JSONValues.jsonValue(Double.nan, type: .doubleAttributeType) as? String == "NaN")
        #expect(JSONValues.jsonValue(-Double.infinity, type: .floatAttributeType) as? String == "-Infinity")
        #expect(JSONValues.jsonValue([1.5, Double.nan] as [Any], type: nil) as? [AnyHashable] == [1.5 as NSNumber, "NaN"])
        #expect(JSONValues.jsonValue(Decimal.nan, type: .decimalAttributeType) as? String == "NaN")
        let text = try JSONValues.encode(["x": JSONValues.jsonValue(Double.infinity, type: .doubleAttributeType)])
        _ = try Self.strictJSON(text, "encoded")
        let salary = try #require(
            try NSManagedObjectModel(contentsOf: Fixtures.url("Company.xcdatamodeld")).entitiesByName["Employee"]?.attributesByName[
                "salary"])
        #expect((try JSONValues.attributeValue("NaN", for: salary) as? Double)?.isNaN == true)
        #expect(try JSONValues.attributeValue("-Infinity", for: salary) as? Double == -.infinity)
        #expect(throws: ToolFailure.self) { try JSONValues.attributeValue("nan", for: salary) }
        // A store cannot hold NaN (SQLite reads it back as NULL): import names the record and key.
        let file = dir.file("nan.json")
        try Data(#"[{"name": "n", "salary": "NaN"}]"#.utf8).write(to: file)
        let r = coredata(["import", "--model", model, "--store", dir.file("nan.sqlite").path, "--entity", "Employee", file.path])
        #expect(r.code == 1 && r.err.contains("salary") && r.err.contains("NaN"), "\(r.err)")
    }

    @Test func numericOptionsAndPathsAreRefusedByName() throws {
        let store = try companyStore()
        let base = ["fetch", "--model", model, "--store", store, "--entity", "Employee"]
        for (arguments, message) in [
            (base + ["--limit", "-1"], "--limit must be 0 or more"),
            (base + ["--offset", "-1"], "--offset must be 0 or more"),
            (["fetch", "--model", model, "--store", "", "--entity", "Employee"], "the path given is empty"),
            (["fetch", "--model", "", "--store", store, "--entity", "Employee"], "--model needs the path of a model"),
            (["info", "--store", ""], "the path given is empty"),
            (
                ["import", "--model", model, "--store", store, "--batch-size", "-5", dir.file("x.json").path],
                "--batch-size must be 1 or more"
            ),
            (
                ["import", "--model", model, "--store", store, "--batch-size", "0", dir.file("x.json").path],
                "--batch-size must be 1 or more"
            ),
            (
                [
                    "track", "--model", model, "--store", store, "--entity", "Employee", "--ref-key", "name", "--sort", "name", "--limit",
                    "-2", "s",
                ], "--limit must be 0 or more"
            ),
            (
                [
                    "track", "--model", model, "--store", store, "--entity", "Employee", "--ref-key", "name", "--sort", "name", "--offset",
                    "-2", "s",
                ], "--offset must be 0 or more"
            ),
            (
                [
                    "track", "--model", model, "--store", store, "--entity", "Employee", "--ref-key", "name", "--sort", "name",
                    "--batch-size", "-2", "s",
                ], "--batch-size must be 0 or more"
            ),
            (
                [
                    "watch", "--model", model, "--store", store, "--entity", "Employee", "--ref-key", "name", "--sort", "name", "--for",
                    "-1",
                ], "--for needs a positive"
            ),
            (["serve", "--model", model, "--store", store, "--entity", "Employee", "--port", "-1"], "--port must be between 0 and 65535"),
            (["serve", "--model", model, "--store", store, "--entity", "Employee", "--interval", "-10"], "--interval must be at least 10"),
        ] {
            let r = coredata(arguments)
            #expect(r.code == 2 && r.err.contains(message), "\(arguments.joined(separator: " ")): \(r.err)")
        }
    }

    /// Every JSON output of `fetch`, `info`, `track` and `watch` over the stores Apple's Core Data wrote parses with
    /// a strict reader.
    @Test(.enabled(if: Requirement.corpusIsPresent, "needs ../shared/corpus beside the checkout"))
    func everyOutputOverTheCorpusStoresIsValidJSON() throws {
        let stores = Requirement.corpus.appendingPathComponent("apple-stores")
        let files = try #require(FileManager.default.enumerator(atPath: stores.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".sqlite") || $0.hasSuffix(".wiredatabase") || $0.hasSuffix(".db") }.sorted()
        var outputs = 0
        for relative in files {
            let source = stores.appendingPathComponent(relative)
            let copy = dir.file(relative.replacingOccurrences(of: "/", with: "_"))
            for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: source.path + suffix) {
                try FileManager.default.copyItem(atPath: source.path + suffix, toPath: copy.path + suffix)
            }
            let info = coredata(["info", "--store", copy.path])
            guard info.code == 0 else { continue }  // not a store this tool opens without a model (said on stderr)
            let described = try #require(try Self.strictJSON(info.out, "info \(relative)") as? [String: Any])
            outputs += 1
            guard described["model"] is [String: Any] else { continue }  // no cached model: fetch needs --model
            let entities = (described["entities"] as? [[String: Any]] ?? []).filter { ($0["count"] as? Int ?? 0) > 0 }
            for entity in entities.prefix(6) {
                let name = try #require(entity["name"] as? String)
                let fetch = coredata(["fetch", "--store", copy.path, "--entity", name, "--limit", "40"])
                #expect(fetch.code == 0, "\(relative) \(name): \(fetch.err)")
                guard fetch.code == 0 else { continue }
                _ = try Self.strictJSON(fetch.out, "fetch \(relative) \(name)")
                outputs += 1
            }
            // A controller over the first entity, with an empty script, and a watcher for a moment.
            guard let first = entities.first?["name"] as? String else { continue }
            let attributes = coredata(["fetch", "--store", copy.path, "--entity", first, "--limit", "1"])
            guard let sample = (try? Self.strictJSON(attributes.out, "fetch") as? [[String: Any]])?.first,
                let key = sample.keys.sorted().first(where: {
                    $0 != "entity" && $0 != "objectID" && !(sample[$0] is [Any]) && !(sample[$0] is NSNull)
                })
            else { continue }
            let script = dir.file("empty.jsonl")
            try Data().write(to: script)
            let track = coredata([
                "track", "--store", copy.path, "--entity", first, "--ref-key", key, "--sort", key, "--limit", "30", script.path,
            ])
            if track.code == 0 {
                for line in track.out.split(separator: "\n") { _ = try Self.strictJSON(String(line), "track \(relative) \(first)") }
                outputs += 1
            }
            let watch = coredata([
                "watch", "--store", copy.path, "--entity", first, "--ref-key", key, "--sort", key, "--limit", "30", "--for", "0.05",
            ])
            if watch.code == 0 {
                for line in watch.out.split(separator: "\n") { _ = try Self.strictJSON(String(line), "watch \(relative) \(first)") }
                outputs += 1
            }
        }
        // In Apple's Notes store every entity shares one table: a note's folder and account are told apart by the
        // destination-entity column Core Data writes beside each foreign key.
        let notes = dir.file("apple-ios-notes_NoteStore.sqlite").path
        let table = coredata(["fetch", "--store", notes, "--entity", "ICNote", "--format", "table", "--properties", "folder,account"])
        let rows = table.out.split(separator: "\n").dropFirst(2).map { $0.split(separator: " ", omittingEmptySubsequences: true) }
        #expect(
            !rows.isEmpty && rows.allSatisfy { $0.count == 3 && $0[1].hasPrefix("ICFolder/p") && $0[2].hasPrefix("ICAccount/p") },
            "\(table.out)")
        let json = try #require(
            try Self.strictJSON(coredata(["fetch", "--store", notes, "--entity", "ICFolder"]).out, "fetch") as? [[String: Any]])
        #expect(json.contains { ($0["notes"] as? [String])?.first?.contains("/ICNote/p") == true })
        print("ToolOutputTests: \(outputs) outputs over \(files.count) corpus stores parsed as strict JSON")
        #expect(outputs > 20)
    }
}
