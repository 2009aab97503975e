import Foundation

/// A property list value, as Apple's binary format (`bplist00`) holds it, with the keyed archiver's object
/// references (`uid`) that Foundation's `PropertyListSerialization` keeps out of reach.
///
/// Reading never trusts the bytes: every offset, count and reference is checked, nesting is limited and a reference
/// cycle is an error, so a damaged value in a store is a thrown `PropertyListError`, never a crash.
package indirect enum PropertyListValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case real(Double)
    case date(Date)
    case data(Data)
    case string(String)
    case uid(Int)
    case array([PropertyListValue])
    case set([PropertyListValue])
    /// Keys in the order the file lists them (keyed archives only use string keys).
    case dictionary([String: PropertyListValue])

    package var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    package var dictionary: [String: PropertyListValue]? {
        if case .dictionary(let d) = self { return d }
        return nil
    }

    package var uid: Int? {
        if case .uid(let u) = self { return u }
        return nil
    }
}

/// Why a property list could not be read.
package struct PropertyListError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// Apple's binary property list format, read and written.
package enum BinaryPropertyList {
    static let maximumDepth = 512

    /// Whether `data` starts like a binary property list.
    package static func isBinary(_ data: Data) -> Bool { data.starts(with: Array("bplist0".utf8)) }

    /// Reads a binary property list.
    package static func read(_ data: Data) throws -> PropertyListValue {
        var reader = try Reader(bytes: [UInt8](data))
        return try reader.value(at: reader.top, depth: 0)
    }

    /// Reads a property list in the binary or the XML format; in XML, a keyed archive's `{CF$UID = n}` dictionaries
    /// become `uid` values.
    package static func readAnyFormat(_ data: Data) throws -> PropertyListValue {
        if isBinary(data) { return try read(data) }
        let object: Any
        do {
            object = try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
        } catch {
            throw PropertyListError("not a property list (\(error.localizedDescription))")
        }
        return try value(of: object, depth: 0)
    }

    private static func value(of object: Any, depth: Int) throws -> PropertyListValue {
        guard depth < maximumDepth else { throw PropertyListError("nested more than \(maximumDepth) levels deep") }
        switch object {
        case let s as String: return .string(s)
        case let d as Data: return .data(d)
        case let d as Date: return .date(d)
        case let n as NSNumber:
            let type = String(cString: n.objCType)
            if type == "c" || type == "B", n.int64Value == 0 || n.int64Value == 1, n is Bool { return .bool(n.boolValue) }
            if type == "d" || type == "f" { return .real(n.doubleValue) }
            return .integer(n.int64Value)
        case let a as [Any]: return .array(try a.map { try value(of: $0, depth: depth + 1) })
        case let d as [String: Any]:
            if d.count == 1, let uid = d["CF$UID"] as? NSNumber { return .uid(uid.intValue) }
            return .dictionary(try d.mapValues { try value(of: $0, depth: depth + 1) })
        default: throw PropertyListError("holds a value of an unexpected kind (\(type(of: object)))")
        }
    }

    /// The checked walk over a binary property list's objects.
    private struct Reader {
        let bytes: [UInt8]
        let offsetSize: Int
        let referenceSize: Int
        let offsets: [Int]
        let top: Int
        var visiting: Set<Int> = []

        init(bytes: [UInt8]) throws {
            self.bytes = bytes
            guard bytes.count >= 40, bytes.starts(with: Array("bplist0".utf8)) else {
                throw PropertyListError("not a binary property list (no bplist header)")
            }
            let trailer = bytes.count - 32
            offsetSize = Int(bytes[trailer + 6])
            referenceSize = Int(bytes[trailer + 7])
            let count = try Self.integer(bytes, at: trailer + 8, size: 8)
            let topIndex = try Self.integer(bytes, at: trailer + 16, size: 8)
            let table = try Self.integer(bytes, at: trailer + 24, size: 8)
            guard (1...8).contains(offsetSize), (1...8).contains(referenceSize), count > 0, count < bytes.count,
                topIndex < count, table >= 8, table <= trailer, count <= (trailer - table) / offsetSize
            else { throw PropertyListError("damaged binary property list (its trailer does not fit the file)") }
            var offsets: [Int] = []
            offsets.reserveCapacity(count)
            for i in 0..<count {
                let offset = try Self.integer(bytes, at: table + i * offsetSize, size: offsetSize)
                guard offset >= 8, offset < table else {
                    throw PropertyListError("damaged binary property list (object \(i) lies outside it)")
                }
                offsets.append(offset)
            }
            self.offsets = offsets
            self.top = topIndex
        }

        static func integer(_ bytes: [UInt8], at start: Int, size: Int) throws -> Int {
            guard start >= 0, size <= 8, start + size <= bytes.count else {
                throw PropertyListError("damaged binary property list (truncated)")
            }
            var value: UInt64 = 0
            for i in 0..<size { value = value << 8 | UInt64(bytes[start + i]) }
            guard value <= UInt64(Int.max / 2) else { throw PropertyListError("damaged binary property list (a size of \(value))") }
            return Int(value)
        }

        /// The length that follows a marker whose low nibble is 0xF, and where the content starts.
        func length(_ marker: UInt8, at offset: Int) throws -> (count: Int, start: Int) {
            let nibble = Int(marker & 0x0F)
            guard nibble == 0x0F else { return (nibble, offset + 1) }
            guard offset + 1 < bytes.count, bytes[offset + 1] >> 4 == 0x1 else {
                throw PropertyListError("damaged binary property list (a bad length)")
            }
            let size = 1 << Int(bytes[offset + 1] & 0x0F)
            return (try Self.integer(bytes, at: offset + 2, size: size), offset + 2 + size)
        }

        func slice(_ start: Int, _ count: Int) throws -> ArraySlice<UInt8> {
            guard count >= 0, start + count <= bytes.count else {
                throw PropertyListError("damaged binary property list (an object runs past its end)")
            }
            return bytes[start..<start + count]
        }

        func references(_ start: Int, _ count: Int) throws -> [Int] {
            guard count < bytes.count else { throw PropertyListError("damaged binary property list (a collection of \(count))") }
            return try (0..<count).map { try Self.integer(bytes, at: start + $0 * referenceSize, size: referenceSize) }
        }

        mutating func value(at index: Int, depth: Int) throws -> PropertyListValue {
            guard index >= 0, index < offsets.count else {
                throw PropertyListError("damaged binary property list (a reference to object \(index) of \(offsets.count))")
            }
            guard depth < BinaryPropertyList.maximumDepth else {
                throw PropertyListError("nested more than \(BinaryPropertyList.maximumDepth) levels deep")
            }
            let offset = offsets[index]
            let marker = bytes[offset]
            switch marker >> 4 {
            case 0x0:
                switch marker {
                case 0x00: return .null
                case 0x08: return .bool(false)
                case 0x09: return .bool(true)
                default: throw PropertyListError("damaged binary property list (marker \(marker))")
                }
            case 0x1:
                let size = 1 << Int(marker & 0x0F)
                let raw = try slice(offset + 1, size)
                if size == 16 {  // an unsigned 64-bit value: the high half is zero
                    return .integer(Int64(bitPattern: raw.suffix(8).reduce(0) { $0 << 8 | UInt64($1) }))
                }
                guard size <= 8 else { throw PropertyListError("damaged binary property list (an integer of \(size) bytes)") }
                let value = raw.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                // 1, 2 and 4-byte integers are unsigned; 8-byte ones signed.
                return .integer(size == 8 ? Int64(bitPattern: value) : Int64(value))
            case 0x2, 0x3:
                let size = marker == 0x33 ? 8 : 1 << Int(marker & 0x0F)
                let raw = try slice(offset + 1, size).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                let number: Double
                switch size {
                case 4: number = Double(Float(bitPattern: UInt32(raw)))
                case 8: number = Double(bitPattern: raw)
                default: throw PropertyListError("damaged binary property list (a real of \(size) bytes)")
                }
                return marker == 0x33 ? .date(Date(timeIntervalSinceReferenceDate: number)) : .real(number)
            case 0x4:
                let (count, start) = try length(marker, at: offset)
                return .data(Data(try slice(start, count)))
            case 0x5:
                let (count, start) = try length(marker, at: offset)
                guard let s = String(bytes: try slice(start, count), encoding: .isoLatin1) else {
                    throw PropertyListError("damaged ASCII string")
                }
                return .string(s)
            case 0x6:
                let (count, start) = try length(marker, at: offset)
                let raw = try slice(start, count * 2)
                let units = stride(from: raw.startIndex, to: raw.endIndex, by: 2).map { UInt16(raw[$0]) << 8 | UInt16(raw[$0 + 1]) }
                return .string(String(decoding: units, as: UTF16.self))
            case 0x8:
                let size = Int(marker & 0x0F) + 1
                return .uid(try Self.integer(bytes, at: offset + 1, size: size))
            case 0xA, 0xC:
                let (count, start) = try length(marker, at: offset)
                let elements = try collection(try references(start, count), depth: depth, owner: index)
                return marker >> 4 == 0xA ? .array(elements) : .set(elements)
            case 0xD:
                let (count, start) = try length(marker, at: offset)
                let keys = try collection(try references(start, count), depth: depth, owner: index)
                let values = try collection(try references(start + count * referenceSize, count), depth: depth, owner: index)
                var dictionary: [String: PropertyListValue] = [:]
                for (key, value) in zip(keys, values) {
                    guard case .string(let k) = key else { throw PropertyListError("a dictionary key that is not a string") }
                    dictionary[k] = value
                }
                return .dictionary(dictionary)
            default: throw PropertyListError("damaged binary property list (marker \(marker))")
            }
        }

        mutating func collection(_ indexes: [Int], depth: Int, owner: Int) throws -> [PropertyListValue] {
            guard visiting.insert(owner).inserted else {
                throw PropertyListError("damaged binary property list (a collection contains itself)")
            }
            defer { visiting.remove(owner) }
            return try indexes.map { try value(at: $0, depth: depth + 1) }
        }
    }

    /// Writes a binary property list (strings deduplicated, as Apple's writer does).
    package static func write(_ value: PropertyListValue) -> Data {
        var writer = Writer()
        let top = writer.add(value)
        return writer.finish(top: top)
    }

    private struct Writer {
        var objects: [[UInt8]] = []
        var references: [[Int]] = []  // the references of each object, patched in at the end
        var strings: [String: Int] = [:]

        mutating func add(_ value: PropertyListValue) -> Int {
            if case .string(let s) = value, let known = strings[s] { return known }
            let index = objects.count
            objects.append([])
            references.append([])
            switch value {
            case .null: objects[index] = [0x00]
            case .bool(let b): objects[index] = [b ? 0x09 : 0x08]
            case .integer(let i): objects[index] = Self.integer(i)
            case .real(let d): objects[index] = [0x23] + Self.bigEndian(d.bitPattern, size: 8)
            case .date(let d): objects[index] = [0x33] + Self.bigEndian(d.timeIntervalSinceReferenceDate.bitPattern, size: 8)
            case .data(let d): objects[index] = Self.header(0x4, d.count) + [UInt8](d)
            case .string(let s):
                strings[s] = index
                if s.utf8.allSatisfy({ $0 < 0x80 }) {
                    objects[index] = Self.header(0x5, s.utf8.count) + Array(s.utf8)
                } else {
                    let units = Array(s.utf16)
                    objects[index] = Self.header(0x6, units.count) + units.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
                }
            case .uid(let u):
                let size = u < 0x100 ? 1 : u < 0x10000 ? 2 : 4
                objects[index] = [0x80 | UInt8(size - 1)] + Self.bigEndian(UInt64(u), size: size)
            case .array(let a), .set(let a):
                let marker: UInt8 = if case .array = value { 0xA } else { 0xC }
                objects[index] = Self.header(marker, a.count)
                var refs: [Int] = []
                for element in a { refs.append(add(element)) }
                references[index] = refs
            case .dictionary(let d):
                let keys = d.keys.sorted()
                objects[index] = Self.header(0xD, keys.count)
                var refs: [Int] = []
                for key in keys { refs.append(add(.string(key))) }
                for key in keys { refs.append(add(d[key]!)) }
                references[index] = refs
            }
            return index
        }

        static func header(_ kind: UInt8, _ count: Int) -> [UInt8] {
            count < 15 ? [kind << 4 | UInt8(count)] : [kind << 4 | 0x0F] + integer(Int64(count))
        }

        static func integer(_ i: Int64) -> [UInt8] {
            if i >= 0, i <= 0xFF { return [0x10, UInt8(i)] }
            if i >= 0, i <= 0xFFFF { return [0x11] + bigEndian(UInt64(i), size: 2) }
            if i >= 0, i <= 0xFFFF_FFFF { return [0x12] + bigEndian(UInt64(i), size: 4) }
            return [0x13] + bigEndian(UInt64(bitPattern: i), size: 8)
        }

        static func bigEndian(_ value: UInt64, size: Int) -> [UInt8] {
            (0..<size).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
        }

        static func size(for value: Int) -> Int { value < 0x100 ? 1 : value < 0x10000 ? 2 : value < 0x1_0000_0000 ? 4 : 8 }

        func finish(top: Int) -> Data {
            let referenceSize = Self.size(for: objects.count)
            var out: [UInt8] = Array("bplist00".utf8)
            var offsets: [Int] = []
            for (object, refs) in zip(objects, references) {
                offsets.append(out.count)
                out += object
                for r in refs { out += Self.bigEndian(UInt64(r), size: referenceSize) }
            }
            let tableOffset = out.count
            let offsetSize = Self.size(for: tableOffset)
            for offset in offsets { out += Self.bigEndian(UInt64(offset), size: offsetSize) }
            out += [0, 0, 0, 0, 0, 0, UInt8(offsetSize), UInt8(referenceSize)]
            out += Self.bigEndian(UInt64(objects.count), size: 8) + Self.bigEndian(UInt64(top), size: 8)
            out += Self.bigEndian(UInt64(tableOffset), size: 8)
            return Data(out)
        }
    }
}
