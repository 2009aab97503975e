import Foundation
import OpenCoreDataModel
import Testing

@testable import OpenCoreDataContext

/// `coerce` (borrowing) and `coerced` (consuming, which moves a value the attribute holds as it is) must give the same
/// result for every value and attribute type, and that result must be what an attribute of the type can hold.
@Suite struct ValueConversionTests {
    static let samples: [AttributeValue] = [
        .null, .integer(0), .integer(1), .integer(7), .integer(-40_000), .integer(70_000), .integer(Int64(Int32.max) + 1),
        .double(2.5), .double(-0.0), .decimal(Decimal(string: "12.75")!), .bool(true), .bool(false), .string("text"),
        .string(String(repeating: "long ", count: 10)), .date(Date(timeIntervalSinceReferenceDate: 1000)), .data(Data([0, 255])),
        .uuid(UUID(uuidString: "12345678-1234-1234-1234-123456789ABC")!), .uri(URL(string: "https://example.com/a")!),
        .object(OpaqueValue(["any", "value"] as NSArray)),
    ]

    /// Whether an attribute of `type` can hold `value` as stored (the kinds of value each attribute type takes).
    static func fits(_ value: AttributeValue, _ type: NSAttributeType) -> Bool {
        switch (type, value) {
        case (_, .null): return true
        case (.undefinedAttributeType, _): return true  // a transient attribute of undefined type holds any value
        case (.transformableAttributeType, .object): return true  // any value, held as given until a save transforms it
        case (.compositeAttributeType, .object(let o)): return o.value is [String: Any]  // a dictionary of its elements
        case (.integer16AttributeType, .integer(let i)): return Int16(exactly: i) != nil
        case (.integer32AttributeType, .integer(let i)): return Int32(exactly: i) != nil
        case (.integer64AttributeType, .integer), (.doubleAttributeType, .double), (.floatAttributeType, .double),
            (.decimalAttributeType, .decimal), (.booleanAttributeType, .bool), (.stringAttributeType, .string),
            (.dateAttributeType, .date), (.binaryDataAttributeType, .data), (.UUIDAttributeType, .uuid), (.URIAttributeType, .uri):
            return true
        default: return false
        }
    }

    @Test func coerceAndCoercedAgreeAndGiveValuesTheTypeHolds() {
        for type in NSAttributeType.allCases {
            for value in Self.samples {
                let borrowed = ValueConversion.coerce(value, to: type)
                let consumed = ValueConversion.coerced(value, to: type)
                #expect(
                    borrowed == consumed,
                    "\(value) as \(type): coerce \(String(describing: borrowed)), coerced \(String(describing: consumed))")
                if let borrowed {
                    #expect(Self.fits(borrowed, type), "\(value) as \(type) gave \(borrowed), which the type does not hold")
                }
                // A value the type holds as it is comes back unchanged.
                if Self.fits(value, type), type != .floatAttributeType {
                    #expect(borrowed == value, "\(value) as \(type) changed to \(String(describing: borrowed))")
                }
            }
        }
        // Conversions the setters rely on.
        #expect(ValueConversion.coerce(.integer(70_000), to: .integer16AttributeType) == nil)
        #expect(ValueConversion.coerce(.bool(true), to: .integer32AttributeType) == .integer(1))
        #expect(ValueConversion.coerce(.integer(1), to: .booleanAttributeType) == .bool(true))
        #expect(ValueConversion.coerce(.integer(2), to: .booleanAttributeType) == nil)
        #expect(ValueConversion.coerce(.integer(3), to: .doubleAttributeType) == .double(3))
        #expect(ValueConversion.coerce(.double(0.1), to: .floatAttributeType) == .double(Double(Float(0.1))))
        #expect(ValueConversion.coerce(.string("1"), to: .integer64AttributeType) == nil)
        // A transformable attribute holds what it is given; `.data` is its stored form, so given bytes are wrapped.
        #expect(ValueConversion.coerce(.data(Data([1])), to: .transformableAttributeType) == .object(OpaqueValue(Data([1]))))
        #expect(ValueConversion.coerce(.string("s"), to: .transformableAttributeType) == .object(OpaqueValue("s")))
    }
}
