import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// A minimal element tree read with Foundation's `XMLParser`, enough for Xcode's model `contents` and
/// `.xccurrentversion` files.
struct XMLElementNode {
    var name: String
    var attributes: [String: String]
    var children: [XMLElementNode]
    var text: String
    var line: Int

    func children(named name: String) -> [XMLElementNode] { children.filter { $0.name == name } }
}

enum XMLTree {
    /// Parses `data`; throws a message with the line and column of the first syntax error.
    static func parse(_ data: Data) throws(XMLTreeError) -> XMLElementNode {
        let parser = XMLParser(data: data)
        let builder = TreeBuilder()
        parser.delegate = builder
        parser.shouldProcessNamespaces = false
        let ok = parser.parse()
        if !ok || builder.root == nil {
            let detail = parser.parserError.map { "\($0.localizedDescription)" } ?? "no root element"
            throw XMLTreeError(
                message: "not well-formed XML at line \(parser.lineNumber), column \(parser.columnNumber): \(detail)")
        }
        return builder.root!
    }
}

struct XMLTreeError: Error {
    let message: String
}

private final class TreeBuilder: NSObject, XMLParserDelegate {
    var stack: [XMLElementNode] = []
    var root: XMLElementNode?

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName qName: String?,
        attributes attributeDict: [String: String] = [:]
    ) {
        stack.append(XMLElementNode(name: elementName, attributes: attributeDict, children: [], text: "", line: parser.lineNumber))
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard !stack.isEmpty else { return }
        stack[stack.count - 1].text += string
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
        guard let node = stack.popLast() else { return }
        if stack.isEmpty {
            root = node
        } else {
            stack[stack.count - 1].children.append(node)
        }
    }
}
