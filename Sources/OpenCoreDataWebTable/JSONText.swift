/// JSON text written directly: the page's messages are arrays of strings and numbers, made once per batch for every
/// page, and writing them by hand costs a fraction of building dictionaries for `JSONSerialization`.
struct JSONText {
    private var members: [String] = []

    /// An object to fill with `field` and `raw`.
    static func object() -> JSONText { JSONText() }

    /// Adds `"key": "value"`.
    mutating func field(_ key: String, _ value: String) { members.append(Self.string(key) + ":" + Self.string(value)) }

    /// Adds `"key": value` for a number.
    mutating func field(_ key: String, _ value: Int) { members.append(Self.string(key) + ":" + String(value)) }

    /// Adds `"key": json`, where `json` is already JSON text.
    mutating func raw(_ key: String, _ json: String) { members.append(Self.string(key) + ":" + json) }

    /// The object's text.
    var text: String { "{" + members.joined(separator: ",") + "}" }

    /// An array of elements that are already JSON text.
    static func array(_ elements: [String]) -> String { "[" + elements.joined(separator: ",") + "]" }

    /// `value` as a JSON string: quotes, backslashes and control characters escaped, everything else as it is.
    static func string(_ value: String) -> String {
        var result = "\""
        result.reserveCapacity(value.utf8.count + 2)
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
