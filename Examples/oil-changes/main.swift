// Oil Changes (seed 001) on Linux: `swift run oil-changes --script FILE` runs a scripted session.
import Foundation
import SeedApps

exit(
    SeedSession.main(
        OilChanges.self, Array(CommandLine.arguments.dropFirst()), output: { print($0) },
        errors: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }))
