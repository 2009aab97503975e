// `coredata`: load data into an OpenCoreData store and query it from the terminal. See `coredata --help`.
import CoreDataCommandLine
import Foundation

exit(CoreDataTool.run(Array(CommandLine.arguments.dropFirst())))
