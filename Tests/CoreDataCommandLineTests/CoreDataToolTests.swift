import CoreDataCommandLine
import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Runs `coredata` in-process and returns (exit code, stdout, stderr).
func coredata(_ arguments: [String]) -> (code: Int32, out: String, err: String) {
    let console = ToolConsole(echo: false)
    let code = CoreDataTool.run(arguments, console: console)
    return (code, console.output, console.errorOutput)
}

let groceriesJSON = """
    [
      {"name": "Donut", "price": 156}, {"name": "Soda", "price": 425}, {"name": "Soda", "price": 85},
      {"name": "Cheddar Cheese", "price": 400}, {"name": "Flour", "price": 920}, {"name": "Parmesan Cheese", "price": 861},
      {"name": "Cheddar Cheese", "price": 221}, {"name": "Parmesan Cheese", "price": 345}, {"name": "Milk"}
    ]
    """

@Suite struct CoreDataToolTests {
    let dir = TemporaryDirectory()
    var store: String { dir.file("g.sqlite").path }
    var groceriesModel: String { Fixtures.url("Groceries.xcdatamodel").path }
    var companyModel: String { Fixtures.url("Company.xcdatamodeld").path }

    func write(_ text: String, _ name: String) throws -> String {
        let url = dir.file(name)
        try Data(text.utf8).write(to: url)
        return url.path
    }

    func importGroceries() throws {
        let file = try write(groceriesJSON, "g.json")
        let result = coredata(["import", "--model", groceriesModel, "--store", store, "--entity", "Products", file])
        #expect(result.code == 0, "\(result.err)")
        #expect(result.out.contains("Imported 9 objects (Products: 9)"))
    }

    @Test func importThenFetchWithPredicateSortAndLimit() throws {
        try importGroceries()
        let r = coredata([
            "fetch", "--model", groceriesModel, "--store", store, "--entity", "Products",
            "--predicate", "name CONTAINS[cd] 'cheese' AND price < 500", "--sort", "name", "--sort", "price:desc",
        ])
        #expect(r.code == 0, "\(r.err)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [[String: Any]])
        #expect(rows.map { $0["name"] as? String } == ["Cheddar Cheese", "Cheddar Cheese", "Parmesan Cheese"])
        #expect(rows.map { ($0["price"] as? NSNumber)?.intValue } == [400, 221, 345])
        #expect(rows.allSatisfy { $0["entity"] as? String == "Products" })

        let limited = coredata([
            "fetch", "--model", groceriesModel, "--store", store, "--entity", "Products", "--sort", "price", "--limit", "2", "--offset",
            "1",
        ])
        let prices = (try JSONSerialization.jsonObject(with: Data(limited.out.utf8)) as? [[String: Any]])?.map {
            ($0["price"] as? NSNumber)?.intValue
        }
        // Milk has no price in the file, so it takes the model's default, 0, and sorts first; the offset skips it.
        #expect(prices == [85, 156], "\(limited.out)")
    }

    @Test func resultKindsAndTableFormat() throws {
        try importGroceries()
        let base = ["fetch", "--model", groceriesModel, "--store", store, "--entity", "Products"]
        let count = coredata(base + ["--result", "count", "--predicate", "price > 400"])
        #expect(count.code == 0 && count.out.trimmingCharacters(in: .whitespacesAndNewlines) == "3")
        let ids = coredata(base + ["--result", "ids", "--limit", "2", "--sort", "price"])
        let idList = try #require(try JSONSerialization.jsonObject(with: Data(ids.out.utf8)) as? [String])
        #expect(idList.count == 2 && idList.allSatisfy { $0.hasPrefix("x-coredata://") })
        let dicts = coredata(base + ["--result", "dictionaries", "--properties", "name", "--sort", "name", "--limit", "2"])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(dicts.out.utf8)) as? [[String: Any]])
        #expect(rows.map { $0.keys.sorted() } == [["name"], ["name"]])
        let table = coredata(base + ["--format", "table", "--sort", "price:desc", "--limit", "2"])
        let lines = table.out.split(separator: "\n").map(String.init)
        #expect(lines.count == 4, "\(table.out)")
        #expect(lines[0].hasPrefix("entity") && lines[0].contains("name") && lines[0].contains("price"))
        #expect(lines[2].contains("Flour") && lines[2].contains("920"))
        // An integer 1 or 0 is a number in a table, not `true` / `false` (NSNumber casts to Bool).
        let file = dir.file("ones.json")
        try Data(#"[{"name": "One", "price": 1}, {"name": "Zero", "price": 0}]"#.utf8).write(to: file)
        #expect(coredata(["import", "--model", groceriesModel, "--store", store, "--entity", "Products", file.path]).code == 0)
        let small = coredata(base + ["--format", "table", "--predicate", "price < 2 AND name IN {'One', 'Zero'}", "--sort", "price"])
        let cells = small.out.split(separator: "\n").dropFirst(2).map { $0.split(separator: " ").map(String.init) }
        #expect(cells.map(\.last) == ["0", "1"], "\(small.out)")
    }

    @Test func severalEntitiesRelationshipsAndInverses() throws {
        let json = """
            {
              "Department": [{"@id": "rd", "name": "R&D", "budget": "1000.25"}],
              "Employee": [
                {"@id": "ann", "name": "Ann", "age": 31, "active": true, "born": "1990-05-01T12:00:00Z", "department": "rd",
                 "badge": "00000000-0000-0000-0000-000000000001", "photo": "AQID", "homepage": "https://ann.example",
                 "projects": ["apollo"]},
                {"@id": "bob", "name": "Bob", "department": "rd", "projects": ["apollo"]}
              ],
              "Manager": [{"@id": "max", "name": "Max", "headOf": "rd"}],
              "Project": [{"@id": "apollo", "title": "Apollo"}]
            }
            """
        let file = try write(json, "company.json")
        let store = dir.file("c.sqlite").path
        let result = coredata(["import", "--model", companyModel, "--store", store, file])
        #expect(result.code == 0, "\(result.err)")
        #expect(result.out.contains("Imported 5 objects"))
        let base = ["fetch", "--model", companyModel, "--store", store]
        // Inverses were set: the department lists both employees, the project both members.
        let rd = coredata(
            base + ["--entity", "Department", "--predicate", "employees.@count == 2 AND head.name == 'Max'", "--result", "count"])
        #expect(rd.out.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "\(rd.err)")
        let members = coredata(base + ["--entity", "Employee", "--predicate", "ANY projects.title == 'Apollo'", "--result", "count"])
        #expect(members.out.trimmingCharacters(in: .whitespacesAndNewlines) == "2", "\(members.err)")
        let ann = coredata(base + ["--entity", "Employee", "--predicate", "name == 'Ann'"])
        let row = try #require((try JSONSerialization.jsonObject(with: Data(ann.out.utf8)) as? [[String: Any]])?.first)
        #expect(row["born"] as? String == "1990-05-01T12:00:00Z")
        #expect(row["photo"] as? String == "AQID")
        #expect(row["active"] as? Bool == true)
        #expect(row["badge"] as? String == "00000000-0000-0000-0000-000000000001")
        let sub = coredata(base + ["--entity", "Employee", "--no-subentities", "--result", "count"])
        #expect(sub.out.trimmingCharacters(in: .whitespacesAndNewlines) == "2")
    }

    @Test(arguments: [
        ("[{\"name\": \"A\", \"colour\": 1}]", "Record #1 of 'Products': unknown key 'colour'"),
        ("[{\"name\": \"A\", \"price\": \"cheap\"}]", "Record #1 of 'Products': key 'price' expects Integer 32, got string \"cheap\""),
        ("[{\"name\": \"A\"}, {\"name\": 5}]", "Record #2 of 'Products': key 'name' expects String, got number 5"),
        ("[{\"@id\": \"x\"}, {\"@id\": \"x\"}]", "\"@id\" \"x\" is used twice"),
        ("[3]", "Record #1 of 'Products' is number 3, not a JSON object"),
        ("{\"Products\": [{\"name\": \"A\"}], \"Nope\": []}", "no entity named 'Nope'"),
        ("not json", "is not valid JSON"),
    ])
    func badRecordsFailTheWholeImport(_ json: String, _ expected: String) throws {
        try importGroceries()
        let file = try write(json, "bad.json")
        let isArray = json.hasPrefix("[") || json == "not json"
        let result = coredata(
            ["import", "--model", groceriesModel, "--store", store] + (isArray ? ["--entity", "Products"] : []) + [file])
        #expect(result.code == 1)
        #expect(result.err.contains(expected), "\(result.err)")
        let count = coredata(["fetch", "--model", groceriesModel, "--store", store, "--entity", "Products", "--result", "count"])
        #expect(count.out.trimmingCharacters(in: .whitespacesAndNewlines) == "9", "the store is left as it was")
    }

    @Test func danglingReferencesAndValidationFailuresWriteNothing() throws {
        let store = dir.file("c.sqlite").path
        let dangling = try write(#"{"Employee": [{"name": "A", "department": "nowhere"}]}"#, "d.json")
        let r1 = coredata(["import", "--model", companyModel, "--store", store, dangling])
        #expect(r1.code == 1)
        #expect(r1.err.contains("refers to \"@id\" \"nowhere\", which no record in the file has"), "\(r1.err)")
        let invalid = try write(#"{"Department": [{"name": "Fine"}], "Employee": [{"@id": "e", "age": 3}]}"#, "v.json")
        let r2 = coredata(["import", "--model", companyModel, "--store", store, invalid])
        #expect(r2.code == 1)
        #expect(r2.err.contains("Nothing was imported"), "\(r2.err)")
        #expect(r2.err.contains("'name' is required") && r2.err.contains("record #1 of 'Employee' (@id \"e\")"), "\(r2.err)")
        // The store did not exist before: the failed imports leave none behind.
        #expect(!FileManager.default.fileExists(atPath: store))
        let count = coredata(["fetch", "--model", companyModel, "--store", store, "--entity", "Department", "--result", "count"])
        #expect(count.code == 1 && count.err.contains("No store at"), "\(count.err)")
    }

    @Test func errorsAndExitCodes() throws {
        try importGroceries()
        let base = ["fetch", "--model", groceriesModel, "--store", store]
        let badPredicate = coredata(base + ["--entity", "Products", "--predicate", "price <"])
        #expect(badPredicate.code == 1)
        #expect(badPredicate.err.contains("expected a value or key path") && badPredicate.err.contains("^"), "\(badPredicate.err)")
        let unknownKey = coredata(base + ["--entity", "Products", "--predicate", "cost < 3"])
        #expect(unknownKey.code == 1 && unknownKey.err.contains("no property 'cost'"))
        let unknownEntity = coredata(base + ["--entity", "Nope"])
        #expect(unknownEntity.code == 1 && unknownEntity.err.contains("no entity named 'Nope'"))
        let missingStore = coredata([
            "fetch", "--model", groceriesModel, "--store", dir.file("missing.sqlite").path, "--entity", "Products",
        ])
        #expect(missingStore.code == 1 && missingStore.err.contains("No store at"))
        #expect(!FileManager.default.fileExists(atPath: dir.file("missing.sqlite").path), "fetch never creates a store")
        let usage = coredata(["fetch", "--model", groceriesModel])
        #expect(usage.code == 2)
        #expect(usage.err.contains("Usage:"), "\(usage.err)")
        let badSort = coredata(base + ["--entity", "Products", "--sort", "name:sideways"])
        #expect(badSort.code == 2 && badSort.err.contains("Unknown sort modifier 'sideways'"))
        let unknownCommand = coredata(["frobnicate"])
        #expect(unknownCommand.code == 2)
        let help = coredata(["--help"])
        #expect(help.code == 0 && help.out.contains("import") && help.out.contains("fetch"))
    }

    @Test func fetchWritesNothing() throws {
        try importGroceries()
        let before = try Data(contentsOf: URL(fileURLWithPath: store))
        let modified = try FileManager.default.attributesOfItem(atPath: store)[.modificationDate] as? Date
        _ = coredata(["fetch", "--model", groceriesModel, "--store", store, "--entity", "Products"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: store)) == before)
        #expect(try FileManager.default.attributesOfItem(atPath: store)[.modificationDate] as? Date == modified)
    }
}

@Suite struct TrackCommandTests {
    let dir = TemporaryDirectory()
    var model: String { Fixtures.url("Groceries.xcdatamodel").path }

    func lines(_ text: String) throws -> [[String: Any]] {
        try text.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
    }

    @Test func tracksLocalEditsSavesAndBackgroundSaves() throws {
        let store = dir.file("t.sqlite").path
        let data = dir.file("d.json")
        try Data(#"[{"name":"Banana","price":185},{"name":"Milk","price":409},{"name":"Soda","price":76}]"#.utf8).write(to: data)
        #expect(coredata(["import", "--model", model, "--store", store, "--entity", "Products", data.path]).code == 0)
        let script = dir.file("s.jsonl")
        try Data(
            """
            {"op":"insert","entity":"Products","values":{"name":"Apple","price":1}}
            {"op":"process"}
            {"op":"update","ref":"Milk","values":{"price":50}}
            {"op":"save"}

            {"op":"background","ops":[{"op":"delete","ref":"Soda"},{"op":"insert","values":{"name":"Zucchini","price":2}}]}
            """.utf8
        ).write(to: script)
        let result = coredata([
            "track", "--model", model, "--store", store, "--entity", "Products", "--ref-key", "name", "--sort", "price",
            "--snapshots", script.path,
        ])
        #expect(result.code == 0, "\(result.err)")
        let out = try lines(result.out)
        #expect(out.count == 5, "\(result.out)")
        #expect((out[0]["initial"] as? [[String: Any]])?.first?["refs"] as? [String] == ["Soda", "Banana", "Milk"])
        let insert = try #require((out[1]["objects"] as? [[String: Any]])?.first)
        #expect(insert["type"] as? String == "insert" && insert["ref"] as? String == "Apple")
        #expect(insert["to"] as? [Int] == [0, 0] && insert["from"] is NSNull)
        let move = try #require((out[2]["objects"] as? [[String: Any]])?.first)
        #expect(move["type"] as? String == "move" && move["from"] as? [Int] == [0, 3] && move["to"] as? [Int] == [0, 1])
        #expect(((out[3]["after"] as? [[String: Any]])?.first?["refs"] as? [String]) == ["Apple", "Zucchini", "Milk", "Banana"])
        #expect(((out[4]["final"] as? [[String: Any]])?.first?["refs"] as? [String]) == ["Apple", "Zucchini", "Milk", "Banana"])
        #expect(result.out.split(separator: "\n")[1].hasPrefix("{\"sections\":"), "sections come first")
    }

    /// A child context's saved ops arrive in the tracked context as its own changes (one batch); an unsaved child
    /// changes nothing; the store has the child's changes only after a later "save".
    @Test func childContextOpsSaveIntoTheTrackedContext() throws {
        let store = dir.file("c.sqlite").path
        let data = dir.file("d.json")
        try Data(#"[{"name":"Banana","price":185},{"name":"Milk","price":409}]"#.utf8).write(to: data)
        #expect(coredata(["import", "--model", model, "--store", store, "--entity", "Products", data.path]).code == 0)
        let script = dir.file("child.jsonl")
        try Data(
            """
            {"op":"child","ops":[{"op":"insert","values":{"name":"Kiwi","price":300}},{"op":"update","ref":"Banana","values":{"price":500}}],"save":true}
            {"op":"child","ops":[{"op":"delete","ref":"Milk"}],"save":false}
            {"op":"child","ops":[{"op":"delete","ref":"Kiwi"}]}
            """.utf8
        ).write(to: script)
        let result = coredata([
            "track", "--model", model, "--store", store, "--entity", "Products", "--ref-key", "name", "--sort", "price",
            "--snapshots", script.path,
        ])
        #expect(result.code == 0, "\(result.err)")
        let out = try lines(result.out)
        #expect(out.count == 3, "initial, one batch for the saved child, final: \(result.out)")
        let changes = (out[1]["objects"] as? [[String: Any]]) ?? []
        #expect(Set(changes.compactMap { $0["ref"] as? String }) == ["Kiwi", "Banana"], "\(changes)")
        #expect(((out[1]["after"] as? [[String: Any]])?.first?["refs"] as? [String]) == ["Kiwi", "Milk", "Banana"])
        // Nothing was saved to the store: the tracked context was never saved.
        let fetched = coredata(["fetch", "--model", model, "--store", store, "--entity", "Products", "--sort", "price"])
        #expect(!fetched.out.contains("Kiwi") && fetched.out.contains("185"), "\(fetched.out)")
        let bad = dir.file("bad-child.jsonl")
        try Data(#"{"op":"child","ops":[],"save":"yes"}"#.utf8).write(to: bad)
        let refused = coredata([
            "track", "--model", model, "--store", store, "--entity", "Products", "--ref-key", "name", "--sort", "price", bad.path,
        ])
        #expect(refused.code == 1 && refused.err.contains("line 1: \"child\"'s \"save\" must be true or false"), "\(refused.err)")
    }

    @Test func badScriptLinesNameTheLine() throws {
        let store = dir.file("t.sqlite").path
        let data = dir.file("d.json")
        try Data(#"[{"name":"Banana","price":185}]"#.utf8).write(to: data)
        _ = coredata(["import", "--model", model, "--store", store, "--entity", "Products", data.path])
        for (text, expected) in [
            ("{\"op\":\"process\"}\nnot json", "line 2: not valid JSON (column 1: unexpected 'n'"),
            ("[1]", "line 1: not a JSON object but an array"),
            ("{\"op\":\"fly\"}", "line 1: unknown op \"fly\""),
            ("{\"op\":\"update\",\"ref\":\"Kiwi\",\"values\":{}}", "line 1: no Products has name = Kiwi"),
            ("{\"op\":\"insert\",\"values\":{\"price\":\"x\"}}", "line 1: key 'price' expects Integer 32"),
        ] {
            let script = dir.file("bad.jsonl")
            try Data(text.utf8).write(to: script)
            let r = coredata([
                "track", "--model", model, "--store", store, "--entity", "Products", "--ref-key", "name", "--sort", "name", script.path,
            ])
            #expect(r.code == 1)
            #expect(r.err.contains(expected), "\(r.err)")
        }
        let noSort = coredata(["track", "--model", model, "--store", store, "--entity", "Products", "--ref-key", "name", "x.jsonl"])
        #expect(noSort.code == 2)
    }
}
