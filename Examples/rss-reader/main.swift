// The RSS reader (seed 000) on Linux: `swift run rss-reader --feed Examples/data/feeds/station-news.xml`.
import Foundation
import SeedApps

exit(
    SeedSession.main(
        RSSReader.self, Array(CommandLine.arguments.dropFirst()), output: { print($0) },
        errors: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }))
