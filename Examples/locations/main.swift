// Locations (seed 004) on Linux: `swift run locations --location LAT,LON --script FILE` runs a scripted session.
import Foundation
import SeedApps

exit(
    SeedSession.main(
        Locations.self, Array(CommandLine.arguments.dropFirst()), output: { print($0) },
        errors: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }))
