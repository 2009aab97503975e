import Foundation

/// Decompresses raw DEFLATE data (RFC 1951, no zlib or gzip header), as Core Data stores its model cache
/// (`Z_MODELCACHE.Z_CONTENT`).
///
/// Every read is bounds-checked and the output is capped, so damaged bytes are a thrown `PropertyListError`, never a
/// crash or an unbounded allocation.
package enum Inflate {
    /// The most bytes one call produces (a model cache is a few hundred kilobytes).
    static let maximumOutput = 256 << 20

    /// The decompressed bytes of `data`.
    package static func rawDeflate(_ data: Data, limit: Int = maximumOutput) throws -> Data {
        var state = State(input: [UInt8](data), limit: limit)
        try state.run()
        return Data(state.output)
    }

    /// A canonical Huffman code: the count of codes of each length and the symbols in code order.
    private struct Huffman {
        var counts = [Int](repeating: 0, count: 16)
        var symbols: [Int] = []

        /// A code from lengths read from the input: an over-subscribed set of lengths is an error.
        init(lengths: [Int]) throws {
            self.init(trusted: lengths)
            var left = 1
            for length in 1..<16 {
                left <<= 1
                left -= counts[length]
                guard left >= 0 else { throw PropertyListError("damaged compressed data (an over-subscribed code)") }
            }
        }

        /// A code from lengths known to be valid (the fixed codes).
        init(trusted lengths: [Int]) {
            for length in lengths { counts[length] += 1 }
            counts[0] = 0
            var offsets = [Int](repeating: 0, count: 16)
            for length in 1..<15 { offsets[length + 1] = offsets[length] + counts[length] }
            symbols = [Int](repeating: 0, count: lengths.count)
            for (symbol, length) in lengths.enumerated() where length != 0 {
                symbols[offsets[length]] = symbol
                offsets[length] += 1
            }
        }
    }

    private struct State {
        let input: [UInt8]
        let limit: Int
        var position = 0
        var bitBuffer = 0
        var bitCount = 0
        var output: [UInt8] = []

        init(input: [UInt8], limit: Int) {
            self.input = input
            self.limit = limit
        }

        mutating func bits(_ n: Int) throws -> Int {
            while bitCount < n {
                guard position < input.count else { throw PropertyListError("damaged compressed data (it ends too soon)") }
                bitBuffer |= Int(input[position]) << bitCount
                position += 1
                bitCount += 8
            }
            let value = bitBuffer & ((1 << n) - 1)
            bitBuffer >>= n
            bitCount -= n
            return value
        }

        mutating func decode(_ code: Huffman) throws -> Int {
            var code_ = 0, first = 0, index = 0
            for length in 1..<16 {
                code_ |= try bits(1)
                let count = code.counts[length]
                if code_ - count < first { return code.symbols[index + (code_ - first)] }
                index += count
                first += count
                first <<= 1
                code_ <<= 1
            }
            throw PropertyListError("damaged compressed data (an invalid code)")
        }

        mutating func run() throws {
            var last = false
            while !last {
                last = try bits(1) == 1
                switch try bits(2) {
                case 0: try stored()
                case 1: try codes(State.fixedLengths, State.fixedDistances)
                case 2: try dynamic()
                default: throw PropertyListError("damaged compressed data (block type 3)")
                }
            }
        }

        mutating func stored() throws {
            bitBuffer = 0
            bitCount = 0
            guard position + 4 <= input.count else { throw PropertyListError("damaged compressed data (a stored block runs past the end)") }
            let length = Int(input[position]) | Int(input[position + 1]) << 8
            let complement = Int(input[position + 2]) | Int(input[position + 3]) << 8
            position += 4
            guard length == ~complement & 0xFFFF, position + length <= input.count else {
                throw PropertyListError("damaged compressed data (a stored block's length)")
            }
            try append(input[position..<position + length])
            position += length
        }

        mutating func append(_ bytes: ArraySlice<UInt8>) throws {
            guard output.count + bytes.count <= limit else { throw PropertyListError("compressed data expands past \(limit) bytes") }
            output += bytes
        }

        static let lengthBase = [
            3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258,
        ]
        static let lengthExtra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
        static let distanceBase = [
            1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193,
            12289, 16385, 24577,
        ]
        static let distanceExtra = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13]
        static let fixedLengths = Huffman(
            trusted: [Int](repeating: 8, count: 144) + [Int](repeating: 9, count: 112) + [Int](repeating: 7, count: 24)
                + [Int](repeating: 8, count: 8))
        static let fixedDistances = Huffman(trusted: [Int](repeating: 5, count: 30))

        mutating func codes(_ lengths: Huffman, _ distances: Huffman) throws {
            while true {
                let symbol = try decode(lengths)
                if symbol < 256 {
                    guard output.count < limit else { throw PropertyListError("compressed data expands past \(limit) bytes") }
                    output.append(UInt8(symbol))
                } else if symbol == 256 {
                    return
                } else {
                    let index = symbol - 257
                    guard index < Self.lengthBase.count else { throw PropertyListError("damaged compressed data (a length code)") }
                    let length = Self.lengthBase[index] + (try bits(Self.lengthExtra[index]))
                    let d = try decode(distances)
                    guard d < Self.distanceBase.count else { throw PropertyListError("damaged compressed data (a distance code)") }
                    let distance = Self.distanceBase[d] + (try bits(Self.distanceExtra[d]))
                    guard distance <= output.count else { throw PropertyListError("damaged compressed data (a distance too far back)") }
                    guard output.count + length <= limit else { throw PropertyListError("compressed data expands past \(limit) bytes") }
                    let start = output.count - distance
                    for i in 0..<length { output.append(output[start + i]) }
                }
            }
        }

        static let codeLengthOrder = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]

        mutating func dynamic() throws {
            let literalCount = try bits(5) + 257
            let distanceCount = try bits(5) + 1
            let codeCount = try bits(4) + 4
            guard literalCount <= 286, distanceCount <= 30 else { throw PropertyListError("damaged compressed data (too many codes)") }
            var codeLengths = [Int](repeating: 0, count: 19)
            for i in 0..<codeCount { codeLengths[Self.codeLengthOrder[i]] = try bits(3) }
            let lengthCode = try Huffman(lengths: codeLengths)
            var lengths: [Int] = []
            while lengths.count < literalCount + distanceCount {
                let symbol = try decode(lengthCode)
                switch symbol {
                case 0..<16: lengths.append(symbol)
                case 16:
                    guard let previous = lengths.last else {
                        throw PropertyListError("damaged compressed data (a repeat with nothing before it)")
                    }
                    lengths += [Int](repeating: previous, count: 3 + (try bits(2)))
                case 17: lengths += [Int](repeating: 0, count: 3 + (try bits(3)))
                default: lengths += [Int](repeating: 0, count: 11 + (try bits(7)))
                }
            }
            guard lengths.count == literalCount + distanceCount, lengths[256] != 0 else {
                throw PropertyListError("damaged compressed data (code lengths)")
            }
            try codes(Huffman(lengths: Array(lengths[..<literalCount])), Huffman(lengths: Array(lengths[literalCount...])))
        }
    }
}
