import ArgumentParser
import Dispatch
import Foundation
import OpenCoreData

/// `coredata watch`: a fetched results controller over a store, printing what a table view would receive.
///
/// It reports the changes any other process commits, until a time runs out or a signal stops it. It never writes.
struct WatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Run a fetched results controller over a store and print every batch a table would receive for other processes' commits.",
        discussion: """
            Prints {"initial":…}, then one line per delegate batch (as track prints them) for each change another process \
            commits to the store, seen within a few milliseconds, until --for elapses or SIGINT/SIGTERM arrives; then \
            {"final":…} from a fresh fetch. The store is opened read-only: watch never writes it.
            """)

    @OptionGroup var storeOptions: StoreOptions

    @OptionGroup var controllerOptions: ControllerOptions

    @Option(
        name: .customLong("for"), parsing: .unconditional,
        help: ArgumentHelp("Stop after this many seconds (default: until a signal).", valueName: "seconds"))
    var duration: Double?

    func validate() throws {
        if let duration, !(duration > 0 && duration.isFinite) {
            throw ValidationError("--for needs a positive, finite number of seconds; got \(duration).")
        }
    }

    func run() throws {
        let (container, context) = try storeOptions.open(readOnly: true, watchingOtherProcesses: true)
        let console = ToolConsole.current
        let (entity, refKey, sectionKey) = (controllerOptions.entity, controllerOptions.refKey, controllerOptions.sectionKey)
        let request = try controllerOptions.request()
        // Other processes' commits reach the context through the coordinator's remote-change notification: it merges
        // them (`automaticallyMergesChangesFromParent`), and the controller reports each as one batch. Set before the
        // first fetch: a commit made the moment "initial" is printed must find the context listening (a merge queued
        // behind the fetch only brings it up to date again).
        context.automaticallyMergesChangesFromParent = true
        // Listening for the signals that stop the watch before "initial" is printed: whoever reads that line may send
        // one at once (a signal arriving before, with its default action, would end the process without "final").
        let stop = DispatchSemaphore(value: 0)
        let signals = [SIGINT, SIGTERM].map { number -> any DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { stop.signal() }
            source.resume()
            return source
        }
        defer { signals.forEach { $0.cancel() } }
        let (controller, tracker) = try context.performAndWait {
            _ = try context.entity(named: entity)
            let controller = NSFetchedResultsController(
                fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: sectionKey, cacheName: nil)
            let tracker = Tracker(refKey: refKey, snapshots: false, controller: controller) { console.out($0) }
            controller.delegate = tracker
            try controller.performFetch()
            console.out(try JSONValues.line(["initial": tracker.sections()]))
            return (controller, tracker)
        }
        if let duration {
            _ = stop.wait(timeout: .now() + duration)
        } else {
            stop.wait()
        }
        context.automaticallyMergesChangesFromParent = false
        try context.performAndWait {
            controller.delegate = nil
            if let failure = tracker.failure { throw ToolFailure(failure) }
            let fresh = container.newBackgroundContext()
            try fresh.performAndWait {
                let check = NSFetchedResultsController(
                    fetchRequest: request, managedObjectContext: fresh, sectionNameKeyPath: sectionKey, cacheName: nil)
                try check.performFetch()
                console.out(
                    try JSONValues.line(["final": Tracker(refKey: refKey, snapshots: false, controller: check) { _ in }.sections()]))
            }
        }
    }
}
