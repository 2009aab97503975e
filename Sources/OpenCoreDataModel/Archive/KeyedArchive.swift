import Foundation

/// An `NSKeyedArchiver` archive as a graph of objects: read from the bytes Apple's archiver writes, without
/// Foundation's unarchiver (which on Linux stops the program on a class it was not told to allow).
///
/// `foundationValue(allowing:)` turns an archive of Foundation's value classes (arrays, dictionaries, sets, strings,
/// numbers, dates, data, URLs, UUIDs, null) into Swift values; `KeyedArchive.archive(_:)` writes such values as
/// Apple's archiver does, so either side reads what the other wrote.
package struct KeyedArchive {
    /// The archive's objects (`$objects`): index 0 is `$null`.
    package let objects: [PropertyListValue]
    /// The index of the root object (`$top.root`).
    package let root: Int

    /// The Foundation classes `foundationValue` builds, by archived class name.
    package static let valueClassNames: Set<String> = [
        "NSArray", "NSMutableArray", "NSDictionary", "NSMutableDictionary", "NSSet", "NSMutableSet", "NSOrderedSet",
        "NSMutableOrderedSet", "NSString", "NSMutableString", "NSNumber", "NSDate", "NSData", "NSMutableData", "NSURL",
        "NSUUID", "NSNull", "NSDecimalNumber",
    ]

    /// Reads an archive (binary or XML property list).
    package init(data: Data) throws {
        let plist = try BinaryPropertyList.readAnyFormat(data)
        guard let top = plist.dictionary, top["$archiver"]?.string == "NSKeyedArchiver" else {
            throw PropertyListError("not a keyed archive (no $archiver NSKeyedArchiver)")
        }
        guard case .array(let objects)? = top["$objects"], !objects.isEmpty else {
            throw PropertyListError("a keyed archive without $objects")
        }
        guard let root = top["$top"]?.dictionary?["root"]?.uid, root < objects.count else {
            throw PropertyListError("a keyed archive without a root object")
        }
        self.objects = objects
        self.root = root
    }

    /// The object at `index`, checked.
    package func object(_ index: Int) throws -> PropertyListValue {
        guard index >= 0, index < objects.count else { throw PropertyListError("a reference to object \(index) of \(objects.count)") }
        return objects[index]
    }

    /// The class names of the object at `index` (its `$classes`, most derived first), or nil for a plain value.
    package func classes(of index: Int) throws -> [String]? {
        guard let fields = try object(index).dictionary, let classRef = fields["$class"]?.uid else { return nil }
        guard let description = try object(classRef).dictionary else {
            throw PropertyListError("object \(index)'s class is not a class description")
        }
        if case .array(let chain)? = description["$classes"] {
            let names = chain.compactMap(\.string)
            if !names.isEmpty { return names }
        }
        guard let name = description["$classname"]?.string else { throw PropertyListError("object \(index)'s class has no name") }
        return [name]
    }

    /// Every class the archive uses, with its chain of superclasses.
    package func allClassChains() throws -> [[String]] {
        try objects.indices.compactMap { try classes(of: $0) }
    }

    /// The root object as Swift values.
    ///
    /// - Parameter allowed: the class names an archived object may have (or one of its superclasses), as a secure
    ///   unarchiver checks them.
    /// - Returns: `[Any]`, `[String: Any]` or `[AnyHashable: Any]`, `Set<AnyHashable>`, `NSOrderedSet`, `String`,
    ///   `NSNumber`, `Decimal`, `Date`, `Data`, `URL`, `UUID`, `NSNull`, or nil for an archived nil.
    /// - Throws: `PropertyListError` for a damaged archive, a cycle, or a class that is not allowed.
    package func foundationValue(allowing allowed: Set<String>) throws -> Any? {
        try foundationValue(at: root, allowing: allowed)
    }

    /// The object at `index` as Swift values (see `foundationValue(allowing:)`).
    package func foundationValue(at index: Int, allowing allowed: Set<String>) throws -> Any? {
        var decoder = ValueDecoder(archive: self, allowed: allowed)
        return try decoder.value(at: index, depth: 0)
    }

    /// Writes `value` (made of the types `foundationValue` returns, or their Foundation classes) as Apple's keyed
    /// archiver does.
    package static func archive(_ value: Any?) throws -> Data {
        var encoder = KeyedArchiveEncoder()
        let root = try encoder.reference(value, depth: 0)  // before `finish` reads the objects
        return encoder.finish(root: root)
    }
}

/// Builds Swift values from an archive's objects.
private struct ValueDecoder {
    let archive: KeyedArchive
    let allowed: Set<String>
    var visiting: Set<Int> = []

    mutating func value(at index: Int, depth: Int) throws -> Any? {
        guard depth < BinaryPropertyList.maximumDepth else {
            throw PropertyListError("objects nested more than \(BinaryPropertyList.maximumDepth) deep")
        }
        if index == 0 { return nil }
        let stored = try archive.object(index)
        switch stored {
        case .dictionary(let fields): return try object(fields, at: index, depth: depth)
        case .null: return nil
        case .uid, .array, .set: throw PropertyListError("object \(index) is not an archived object")
        default: return Self.plain(stored)
        }
    }

    mutating func object(_ fields: [String: PropertyListValue], at index: Int, depth: Int) throws -> Any? {
        guard let chain = try archive.classes(of: index) else { throw PropertyListError("object \(index) has no class") }
        guard chain.contains(where: allowed.contains) else {
            throw PropertyListError(
                "the archive holds an object of class \(chain[0]), which is not among the allowed classes (\(allowed.sorted().joined(separator: ", ")))"
            )
        }
        guard visiting.insert(index).inserted else { throw PropertyListError("object \(index) contains itself") }
        defer { visiting.remove(index) }
        func values(_ key: String) throws -> [Any] {
            guard let field = fields[key] else { return [] }
            guard case .array(let refs) = field else { throw PropertyListError("\(chain[0]).\(key) is not a list of objects") }
            return try refs.map { ref -> Any in
                guard let uid = ref.uid else { throw PropertyListError("\(chain[0]).\(key) holds a value that is not a reference") }
                return try value(at: uid, depth: depth + 1) ?? NSNull()
            }
        }
        func field(_ key: String) throws -> Any? {
            guard let value = fields[key] else { return nil }
            if let uid = value.uid { return try self.value(at: uid, depth: depth + 1) }
            return Self.plain(value)
        }
        let name = chain.first(where: KeyedArchive.valueClassNames.contains) ?? chain[0]
        switch name {
        case "NSArray", "NSMutableArray": return try values("NS.objects")
        case "NSOrderedSet", "NSMutableOrderedSet": return NSOrderedSet(array: try values("NS.objects"))
        case "NSSet", "NSMutableSet":
            return Set(
                try values("NS.objects").map { element -> AnyHashable in
                    guard let hashable = element as? AnyHashable else {
                        throw PropertyListError("a set holds a \(type(of: element)), which cannot be hashed")
                    }
                    return hashable
                })
        case "NSDictionary", "NSMutableDictionary":
            let keys = try values("NS.keys"), objects = try values("NS.objects")
            guard keys.count == objects.count else {
                throw PropertyListError("a dictionary with \(keys.count) keys and \(objects.count) values")
            }
            if let stringKeys = keys as? [String] { return Dictionary(zip(stringKeys, objects), uniquingKeysWith: { $1 }) }
            var dictionary: [AnyHashable: Any] = [:]
            for (key, object) in zip(keys, objects) {
                guard let hashable = key as? AnyHashable else { throw PropertyListError("a dictionary key of type \(type(of: key))") }
                dictionary[hashable] = object
            }
            return dictionary
        case "NSString", "NSMutableString":
            if let s = try field("NS.string") as? String { return s }
            if let d = try field("NS.bytes") as? Data, let s = String(data: d, encoding: .utf8) { return s }
            throw PropertyListError("an NSString without NS.string")
        case "NSDate":
            guard let time = try field("NS.time") as? NSNumber else { throw PropertyListError("an NSDate without NS.time") }
            return Date(timeIntervalSinceReferenceDate: time.doubleValue)
        case "NSData", "NSMutableData":
            guard let data = try field("NS.data") as? Data else { throw PropertyListError("an NSData without NS.data") }
            return data
        case "NSURL":
            let base = try field("NS.base") as? URL
            guard let relative = try field("NS.relative") as? String, let url = URL(string: relative, relativeTo: base) else {
                throw PropertyListError("an NSURL without a valid NS.relative")
            }
            return base == nil ? url : url.absoluteURL
        case "NSUUID":
            guard let bytes = try field("NS.uuidbytes") as? Data, bytes.count == 16 else {
                throw PropertyListError("an NSUUID without 16 NS.uuidbytes")
            }
            let b = [UInt8](bytes)
            return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
        case "NSNull": return NSNull()
        case "NSDecimalNumber", "NSNumber": return try decimal(fields)
        default:
            throw PropertyListError("the archive holds an object of class \(chain[0]), which needs its own value transformer")
        }
    }

    /// A value stored inline (a string, number, data or date), as a Swift value; nil for any other.
    static func plain(_ value: PropertyListValue) -> Any? {
        switch value {
        case .string(let s): return s
        case .integer(let i): return NSNumber(value: i)
        case .real(let d): return NSNumber(value: d)
        case .bool(let b): return NSNumber(value: b)
        case .data(let d): return d
        case .date(let d): return d
        default: return nil
        }
    }

    /// An `NSDecimalNumber`: a little-endian mantissa of 16-bit words, an exponent and a sign.
    func decimal(_ fields: [String: PropertyListValue]) throws -> Decimal {
        guard case .integer(let exponent)? = fields["NS.exponent"], case .data(let mantissa)? = fields["NS.mantissa"],
            let e = Int(exactly: exponent), abs(e) <= 128
        else { throw PropertyListError("an NSDecimalNumber without NS.exponent and NS.mantissa") }
        let negative: Bool
        if case .bool(let b)? = fields["NS.negative"] { negative = b } else { negative = false }
        var length = mantissa.count / 2
        if case .integer(let l)? = fields["NS.length"], l >= 0, Int(l) <= length { length = Int(l) }
        let bytes = [UInt8](mantissa)
        var significand = Decimal(0)
        for word in (0..<length).reversed() {
            significand = significand * 65536 + Decimal(Int(bytes[2 * word]) | Int(bytes[2 * word + 1]) << 8)
        }
        return Decimal(sign: negative ? .minus : .plus, exponent: e, significand: significand)
    }
}

/// A value of a module above this one that writes itself as the objects of Apple's classes (a predicate writes
/// `NSComparisonPredicate`, `NSExpression` and operator objects), so that `KeyedArchive.archive` and the archiving
/// transformers take it.
package protocol KeyedArchiveWritable {
    /// The class Apple's secure unarchiver checks for the value (`NSPredicate`), for a transformer's allowed classes.
    var archivedClassName: String { get }
    /// Writes the value's objects and returns the index of its own.
    func write(into encoder: inout KeyedArchiveEncoder) throws -> Int
}

/// Writes an archive's objects.
///
/// They are Foundation values (`reference(_:depth:)`), or objects of any class whose fields the
/// caller gives (`reserve()` then `set(_:_:_:)`, so that objects can refer to each other).
package struct KeyedArchiveEncoder {
    private(set) var objects: [PropertyListValue] = [.string("$null")]
    private var classes: [String: Int] = [:]

    package init() {}

    /// The archive's bytes, with `root` as its root object.
    package func finish(root: Int) -> Data {
        let top: [String: PropertyListValue] = [
            "$archiver": .string("NSKeyedArchiver"), "$version": .integer(100_000), "$objects": .array(objects),
            "$top": .dictionary(["root": .uid(root)]),
        ]
        return BinaryPropertyList.write(.dictionary(top))
    }

    /// A plain value (a string, number or data) as an object of its own.
    package mutating func add(_ object: PropertyListValue) -> Int {
        objects.append(object)
        return objects.count - 1
    }

    /// A place for an object whose fields `set` gives later.
    package mutating func reserve() -> Int { add(.null) }

    /// The fields of the object at `index` and its class chain (most derived first).
    package mutating func set(_ index: Int, _ chain: [String], _ fields: [String: PropertyListValue]) {
        var fields = fields
        fields["$class"] = .uid(classReference(chain))
        objects[index] = .dictionary(fields)
    }

    mutating func classReference(_ chain: [String]) -> Int {
        if let known = classes[chain[0]] { return known }
        let index = add(.dictionary(["$classname": .string(chain[0]), "$classes": .array(chain.map { .string($0) })]))
        classes[chain[0]] = index
        return index
    }

    /// An object with fields, its class recorded after its fields as Apple's archiver does.
    package mutating func archived(_ chain: [String], _ build: (inout Self) throws -> [String: PropertyListValue]) rethrows -> Int {
        let index = reserve()
        let fields = try build(&self)
        set(index, chain, fields)
        return index
    }

    mutating func references(_ values: [Any], depth: Int) throws -> PropertyListValue {
        var refs: [PropertyListValue] = []
        for value in values { refs.append(.uid(try reference(value, depth: depth + 1))) }
        return .array(refs)
    }

    /// A Foundation value (or the Swift value bridged to one) as an object, `$null` (0) for nil.
    package mutating func reference(_ value: Any?, depth: Int) throws -> Int {
        guard depth < BinaryPropertyList.maximumDepth else {
            throw PropertyListError("values nested more than \(BinaryPropertyList.maximumDepth) deep")
        }
        guard let value else { return 0 }
        if value is NSNull { return archived(["NSNull", "NSObject"]) { _ in [:] } }
        if let writable = value as? any KeyedArchiveWritable {
            // Only as the archive's root: the transformers read a predicate back there, not inside a collection.
            guard depth == 0 else {
                throw PropertyListError(
                    "a \(writable.archivedClassName) inside a collection cannot be archived (it would not read back); store it alone")
            }
            return try writable.write(into: &self)
        }
        if let scalar = AttributeValue.converting(value) {
            switch scalar {
            case .null: return 0
            case .string(let s): return add(.string(s))
            case .integer(let i): return add(.integer(i))
            case .double(let d): return add(.real(d))
            case .bool(let b): return add(.bool(b))
            case .data(let d): return add(.data(d))
            case .date(let d): return archived(["NSDate", "NSObject"]) { _ in ["NS.time": .real(d.timeIntervalSinceReferenceDate)] }
            case .uuid(let u):
                let bytes = withUnsafeBytes(of: u.uuid) { Data($0) }
                return archived(["NSUUID", "NSObject"]) { _ in ["NS.uuidbytes": .data(bytes)] }
            case .uri(let url):
                return archived(["NSURL", "NSObject"]) { e in ["NS.base": .uid(0), "NS.relative": .uid(e.add(.string(url.absoluteString)))]
                }
            case .decimal(let d): return archived(["NSDecimalNumber", "NSNumber", "NSValue", "NSObject"]) { _ in Self.decimalFields(d) }
            case .object: break
            }
        }
        switch value {
        case let ordered as NSOrderedSet:
            return try archived(["NSOrderedSet", "NSObject"]) { e in ["NS.objects": try e.references(ordered.array, depth: depth)] }
        case let set as Set<AnyHashable>:
            return try archived(["NSSet", "NSObject"]) { e in ["NS.objects": try e.references(set.map { $0.base }, depth: depth)] }
        case let dictionary as [AnyHashable: Any]:
            let keys = Array(dictionary.keys)
            return try archived(["NSDictionary", "NSObject"]) { e in
                [
                    "NS.keys": try e.references(keys.map { $0.base }, depth: depth),
                    "NS.objects": try e.references(keys.map { dictionary[$0]! }, depth: depth),
                ]
            }
        case let array as [Any]:
            return try archived(["NSArray", "NSObject"]) { e in ["NS.objects": try e.references(array, depth: depth)] }
        default:
            throw PropertyListError(
                "a value of type \(type(of: value)) is not one of Foundation's archivable value types (array, dictionary, set, string, number, date, data, URL, UUID); register a value transformer for it"
            )
        }
    }

    /// An `NSDecimalNumber`'s fields: the significand as little-endian 16-bit words, the exponent and the sign.
    static func decimalFields(_ d: Decimal) -> [String: PropertyListValue] {
        var words: [UInt16] = []  // little-endian
        for digit in "\(d.significand.magnitude)".compactMap(\.wholeNumberValue) {
            var carry = UInt32(digit)
            for i in words.indices {
                let product = UInt32(words[i]) * 10 + carry
                words[i] = UInt16(product & 0xFFFF)
                carry = product >> 16
            }
            if carry > 0 { words.append(UInt16(carry)) }
        }
        let length = words.count
        while words.count < 8 { words.append(0) }
        return [
            "NS.exponent": .integer(Int64(d.exponent)), "NS.length": .integer(Int64(length)), "NS.negative": .bool(d.sign == .minus),
            "NS.compact": .bool(true), "NS.mantissa.bo": .integer(1),
            "NS.mantissa": .data(Data(words.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] })),
        ]
    }
}
