import Foundation

/// ISO 8601 dates with their fractions of a second kept: `2026-01-10T09:00:00Z`, `2026-01-10T09:00:00.25Z`,
/// `2026-01-10T09:00:00.123456+02:00`.
///
/// Foundation's `ISO8601DateFormatter` keeps milliseconds at most, and none without `.withFractionalSeconds`; two
/// events added within one second (or one millisecond) would then sort as equal, or in the wrong order.
///
/// For example:
/// ```swift
/// let date = ISO8601Dates.date(from: "2026-01-10T09:00:00.123456Z")
/// ISO8601Dates.string(from: date!)   // "2026-01-10T09:00:00.123456Z"
/// ```
public enum ISO8601Dates {
    /// The date a text gives: an internet date-time with any number of fractional digits (microseconds are kept),
    /// or a full date (`2026-01-10`, midnight UTC); nil for anything else.
    public static func date(from text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        if let dot = text.firstIndex(of: "."), text[..<dot].contains("T") {
            let digits = text[text.index(after: dot)...].prefix(while: \.isASCIIDigit)
            guard !digits.isEmpty else { return nil }
            let zone = text[text.index(dot, offsetBy: digits.count + 1)...]
            guard let whole = formatter.date(from: String(text[..<dot]) + zone), let fraction = Double("0." + digits) else {
                return nil
            }
            return whole.addingTimeInterval(fraction)
        }
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withFullDate]
        return formatter.date(from: text)
    }

    /// The date in UTC, with as many fractional digits as it has, up to six (microseconds): none for a whole
    /// second.
    public static func string(from date: Date) -> String {
        var seconds = date.timeIntervalSince1970.rounded(.down)
        var micros = Int(((date.timeIntervalSince1970 - seconds) * 1_000_000).rounded())
        if micros == 1_000_000 {
            seconds += 1
            micros = 0
        }
        let formatter = ISO8601DateFormatter()
        let whole = formatter.string(from: Date(timeIntervalSince1970: seconds))
        guard micros > 0 else { return whole }
        var digits = String(micros)
        digits = String(repeating: "0", count: 6 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return String(whole.dropLast()) + "." + digits + "Z"
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
