import Dispatch
import Foundation
import Logging
import OpenCoreData
import OpenCoreDataBrowserTesting
import OpenCoreDataLiveTable
import OpenCoreDataWebTable

// MARK: W9 — the web table in headless Chromium

/// W9: the web table in headless Chromium.
///
/// From `save()` to the change applied in the page's DOM, for one change and for a batch of 1,000; and opening the page
/// until its first screen of rows is shown. Times are read where they happen: the save's start by this process's
/// clock, the DOM's by the page (`window.ocdTable.lastApplied`, `firstRowsShown`), both on the machine's wall clock.
func w9(_ options: Options) throws {
    guard WebDriver.available else {
        print("W9: skipped: needs /usr/bin/chromium and /usr/bin/chromedriver (Debian's chromium, chromium-driver)")
        record("W9", 0, "web table (skipped: no chromium)", [])
        return
    }
    let sizes = options.customSizes.isEmpty ? (options.smoke ? [300] : [100] + options.sizes) : options.customSizes
    for size in sizes {
        print("== W9: preparing \(size) rows")
        let fixture = try Fixture(size: size, items: makeItems(size))
        try runBlocking { try await w9(fixture, options) }
        try report(options)
    }
}

private func w9(_ fixture: Fixture, _ options: Options) async throws {
    let size = fixture.size
    let context = fixture.container.newBackgroundContext()
    let table = try context.performAndWait {
        let controller = NSFetchedResultsController(
            fetchRequest: fixture.sectionedRequest(), managedObjectContext: context, sectionNameKeyPath: "section", cacheName: nil)
        return try LiveTable(controller: controller) { item in
            "\(item.value(forKey: "title") as? String ?? "")  \(item.value(forKey: "score") as? Int64 ?? 0)"
        }
    }
    var logger = Logger(label: "W9")
    logger.logLevel = .critical
    let web = WebTable(table: table, title: "W9", logger: logger)
    let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
    let server = Task { try await web.run(port: 0) { portContinuation.yield($0) } }
    defer { server.cancel() }
    var iterator = ports.makeAsyncIterator()
    guard let port = await iterator.next() else { throw WebDriver.Failure(description: "the web table did not start") }
    let url = URL(string: "http://127.0.0.1:\(port)/")!
    let browser = try await WebDriver(width: 1000, height: 800)
    do {
        try await measurePageOpen(browser, url, size: size, repetitions: options.repetitions)
        let repetitions = options.smoke ? 3 : max(20, options.repetitions * 4)
        var one: [Double] = []
        for round in 0..<repetitions {
            one.append(
                try await saveToDOM(browser, context) {
                    // A visible row's text changes: the first row of the first section.
                    let first = table.controller.object(at: IndexPath(row: 0, section: 0))
                    first.setValue("Edited \(round)", forKey: "title")
                })
        }
        record("W9 one change: save → DOM", size, "OpenCoreData web table", one, reference: true, note: "a visible row's update")
        let batch = min(1_000, size)
        var many: [Double] = []
        for round in 0..<(options.smoke ? 1 : max(5, options.repetitions)) {
            many.append(
                try await saveToDOM(browser, context) {
                    // Half the changes rename rows (updates), half move them (a new score), across the first sections.
                    let objects = table.controller.fetchedObjects ?? []
                    for i in 0..<batch {
                        let object = objects[(i * 7 + round) % size]
                        if i % 2 == 0 {
                            object.setValue("Renamed \(round)-\(i)", forKey: "title")
                        } else {
                            object.setValue(Int64((i * 7_919 + round * 104_729) % 1_000_000), forKey: "score")
                        }
                    }
                })
        }
        record("W9 \(batch) changes: save → DOM", size, "OpenCoreData web table", many, reference: true, note: "updates and moves")
        let errors = try await browser.run("return window.ocdTable.errors") as? [String] ?? []
        if !errors.isEmpty { print("W9: the page reported errors: \(errors)") }
    } catch {
        await browser.quit()
        throw error
    }
    await browser.quit()
}

/// Opens the page `repetitions` times and records when its first rows were on screen, from navigation start.
private func measurePageOpen(_ browser: WebDriver, _ url: URL, size: Int, repetitions: Int) async throws {
    var opens: [Double] = []
    for _ in 0..<repetitions {
        try await browser.open(url)
        try await browser.waitUntil("the first rows", timeout: 30, "return window.ocdTable.firstRowsShown > 0")
        let shown = try await browser.run("return window.ocdTable.firstRowsShown") as? Double ?? 0
        opens.append(shown / 1000)
    }
    let rendered = try await browser.run("return document.querySelectorAll('[data-object-id]').length") as? Int ?? 0
    record("W9 open page: first rows shown", size, "OpenCoreData web table", opens, reference: true, note: "\(rendered) row elements")
}

/// Seconds from the start of the save after `change` to the page applying the batch it causes.
private func saveToDOM(_ browser: WebDriver, _ context: NSManagedObjectContext, _ change: @escaping () -> Void) async throws -> Double {
    let applied = try await browser.run("return window.ocdTable.applied") as? Int ?? 0
    // The edits are made first; the clock starts at save(), which processes them and writes them.
    var start = 0.0
    try context.performAndWait {
        change()
        start = Date().timeIntervalSince1970 * 1000
        try context.save()
    }
    try await browser.waitUntil("the batch in the page", timeout: 30, "return window.ocdTable.applied > \(applied)")
    let done = try await browser.run("return window.ocdTable.lastApplied") as? Double ?? start
    return (done - start) / 1000
}

/// Runs `body` to its end from synchronous code (the benchmarks' main flow), which waits meanwhile: what `body`
/// captures is used by one side at a time.
func runBlocking(_ body: @escaping () async throws -> Void) throws {
    let done = DispatchSemaphore(value: 0)
    let outcome = BlockingOutcome()
    let work = UncheckedWork(body: body)
    Task.detached {
        do { try await work.body() } catch { outcome.error = error }
        done.signal()
    }
    done.wait()
    if let error = outcome.error { throw error }
}

private struct UncheckedWork: @unchecked Sendable {
    let body: () async throws -> Void
}

private final class BlockingOutcome: @unchecked Sendable {
    var error: (any Error)?
}
