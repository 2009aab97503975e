import CoreDataCommandLine
import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// `coredata import` converts each JSON value exactly or refuses it: nothing wraps, rounds, parses by prefix or
/// becomes NaN, malformed JSON is named by line and column, and a refused file leaves the store as it was.
@Suite struct ImportValueTests {
    let dir = TemporaryDirectory()
    var store: String { dir.file("c.sqlite").path }
    var model: String { Fixtures.url("Company.xcdatamodeld").path }

    /// Imports one Employee (or Department) with `field` and returns the tool's result.
    func importOne(_ entity: String, _ field: String) throws -> (code: Int32, out: String, err: String) {
        let file = dir.file("one.json")
        try Data("[{\"name\": \"x\", \(field)}]".utf8).write(to: file)
        return coredata(["import", "--model", model, "--store", store, "--entity", entity, file.path])
    }

    func storedValues(_ entity: String, _ key: String) throws -> [Any] {
        let r = coredata(["fetch", "--model", model, "--store", store, "--entity", entity, "--sort", key])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [[String: Any]], "\(r.err)")
        return rows.compactMap { $0[key] }
    }

    static let refused: [(entity: String, field: String, message: String)] = [
        ("Employee", "\"serial\": 18446744073709551615", "number 18446744073709551615, which is outside its range"),
        ("Employee", "\"serial\": 1e19", "number 1e19, which is outside its range"),
        ("Employee", "\"serial\": -9223372036854775809", "outside its range -9223372036854775808…9223372036854775807"),
        ("Employee", "\"level\": 1e20", "expects Integer 32, got number 1e20, which is outside its range -2147483648…2147483647"),
        ("Employee", "\"age\": 40000", "expects Integer 16, got number 40000, which is outside its range"),
        ("Employee", "\"level\": 2.5", "got number 2.5, which is not a whole number"),
        ("Employee", "\"level\": true", "expects Integer 32, got boolean true"),
        ("Employee", "\"rating\": 1e300", "beyond the range of Float"),
        ("Employee", "\"salary\": 1e400", "expects Double, got number 1e400"),
        ("Employee", "\"active\": 1", "expects Boolean, got number 1 (use true or false)"),
        ("Department", "\"budget\": \"12,5\"", "expects Decimal, got string \"12,5\""),
        ("Department", "\"budget\": \"12.5abc\"", "expects Decimal, got string \"12.5abc\""),
        // A string holding a number holds exactly one: no space around it (JSON would allow that around a value).
        ("Department", "\"budget\": \" 7\"", "expects Decimal, got string \" 7\""),
        ("Department", "\"budget\": \"7\\n\"", "expects Decimal, got string"),
        ("Employee", "\"salary\": \"nan\"", "expects Double, got string \"nan\""),
        ("Department", "\"budget\": \"0x1F\"", "expects Decimal, got string \"0x1F\""),
        ("Department", "\"budget\": 1e300", "beyond the range of Decimal"),
    ]

    @Test(arguments: refused.indices)
    func valuesThatDoNotFitAreRefusedByName(_ index: Int) throws {
        let (entity, field, message) = Self.refused[index]
        let r = try importOne(entity, field)
        #expect(r.code == 1, "\(field): \(r.out)")
        #expect(r.err.contains(message), "\(field): \(r.err)")
        let storeExists = FileManager.default.fileExists(atPath: store)
        #expect(try !storeExists || storedValues(entity, "name").isEmpty, "a refused import wrote objects")
    }

    @Test func valuesThatFitAreStoredExactly() throws {
        let file = dir.file("ok.json")
        try Data(
            """
            {"Employee": [
              {"name": "max", "serial": 9223372036854775807, "level": 1e3, "age": -32768, "salary": 0.1, "rating": 2.5},
              {"name": "min", "serial": -9223372036854775808, "level": 2.0e0, "age": 32767, "salary": -1E-3, "rating": 0}
             ],
             "Department": [{"name": "d1", "budget": "12.50"}, {"name": "d2", "budget": 0.1}, {"name": "d3", "budget": "-3e2"}]}
            """.utf8
        ).write(to: file)
        let r = coredata(["import", "--model", model, "--store", store, file.path])
        #expect(r.code == 0, "\(r.err)")
        #expect(try storedValues("Employee", "serial").map { "\($0)" } == ["-9223372036854775808", "9223372036854775807"])
        #expect(try storedValues("Employee", "level").map { "\($0)" } == ["2", "1000"])
        #expect(try storedValues("Employee", "age").map { "\($0)" } == ["-32768", "32767"])
        #expect(try storedValues("Department", "budget").map { "\($0)" } == ["-300", "0.1", "12.5"])
    }

    static let malformed: [(json: String, message: String)] = [
        ("[{\"name\": \"a\"},]", "line 1, column 16: a trailing comma before ']'"),
        ("[{\"name\": \"a\",}]", "line 1, column 15: a trailing comma before '}'"),
        ("[\n  {\"name\": 'a'}\n]", "line 2, column 12: unexpected '''; expected a value"),
        ("[{\"name\": \"a\"}] x", "line 1, column 17: unexpected 'x' after the JSON value"),
        ("[{\"name\": \"a\", \"name\": \"b\"}]", "line 1, column 16: the key \"name\" appears twice"),
        ("[{\"name\": 012}]", "a number may not start with 0"),
        ("[{\"name\": NaN}]", "unexpected 'N'; expected a value"),
        ("[{\"name\": \"a\\ud800\"}]", "a lone high surrogate"),
        ("[{\"name\": \"tab\there\"}]", "a control character (U+0009)"),
        ("", "line 1, column 1: unexpected end of input; expected a value"),
        (String(repeating: "[", count: 600) + String(repeating: "]", count: 600), "nest more than 512 levels deep"),
    ]

    @Test(arguments: malformed.indices)
    func malformedJSONIsNamedByLineAndColumn(_ index: Int) throws {
        let (json, message) = Self.malformed[index]
        let file = dir.file("bad.json")
        try Data(json.utf8).write(to: file)
        let r = coredata(["import", "--model", model, "--store", store, "--entity", "Employee", file.path])
        #expect(r.code == 1)
        #expect(r.err.contains("is not valid JSON: \(message)") || r.err.contains(message), "\(json.prefix(40)): \(r.err)")
    }

    @Test func textThatIsNotUTF8IsRefusedWhereItStands() throws {
        let file = dir.file("latin1.json")
        var bytes = Array("[{\"name\": \"caf".utf8)
        bytes.append(0xE9)  // é in Latin-1
        bytes += Array("\"}]".utf8)
        try Data(bytes).write(to: file)
        let r = coredata(["import", "--model", model, "--store", store, "--entity", "Employee", file.path])
        #expect(r.code == 1)
        #expect(r.err.contains("line 1, column 15: a string that is not valid UTF-8"), "\(r.err)")
        // The same bytes in a track script are refused too, not saved as U+FFFD.
        let script = dir.file("s.jsonl")
        try Data(Array("{\"op\":\"insert\",\"values\":{\"name\":\"caf".utf8) + [0xE9] + Array("\"}}\n".utf8)).write(to: script)
        let t = coredata([
            "track", "--model", model, "--store", store, "--entity", "Employee", "--ref-key", "name", "--sort", "name", script.path,
        ])
        #expect(t.code == 1)
        #expect(t.err.contains("line 1: not valid JSON (column 37: a string that is not valid UTF-8)"), "\(t.err)")
    }

    @Test func aStringWithNULSurvivesImportAndFetch() throws {
        let r = try importOne("Employee", "\"nickname\": null, \"homepage\": null, \"photo\": null")
        #expect(r.code == 0, "\(r.err)")
        let file = dir.file("nul.json")
        try Data(#"[{"name": "a\u0000b"}]"#.utf8).write(to: file)
        #expect(coredata(["import", "--model", model, "--store", store, "--entity", "Department", file.path]).code == 0)
        let found = coredata([
            "fetch", "--model", model, "--store", store, "--entity", "Department", "--predicate", #"name == "a\u0000b""#,
        ])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(found.out.utf8)) as? [[String: Any]], "\(found.err)")
        #expect(rows.map { $0["name"] as? String } == ["a\u{0}b"])
    }
}
