import Foundation
import Logging
import OpenCoreData
import OpenCoreDataLiveTable
import OpenCoreDataWebTable
import Testing
import _TestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Every test that drives a browser, one at a time: two cores shared by several headless Chromiums, servers and the
/// rest of the suite made a page miss a 10-second wait in a full run.
@Suite(.serialized) enum BrowserTests {}

extension BrowserTests {
    /// The web table in a real browser: headless Chromium, driven through chromedriver, reads what the page shows.
    ///
    /// Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them); without them the suite is skipped, saying why.
    @Suite(.enabled(if: Requirement.browserIsPresent, "needs Debian's chromium and chromium-driver (.ci/run installs them)"))
    struct WebTableBrowserTests {
        /// A store of fruit sectioned by group, its table on a private-queue context, and the web table serving it.
        final class Served: @unchecked Sendable {
            let stack: TestStack
            let context: NSManagedObjectContext
            let table: LiveTable
            let server: Task<Void, any Error>
            let url: URL

            init(fruit: [(name: String, group: String, rank: Int)]) async throws {
                stack = try TestStack(model: Self.model())
                let seed = stack.context()
                try seed.performAndWait {
                    for item in fruit { try seed.make("Fruit", ["name": item.name, "group": item.group, "rank": item.rank]) }
                    try seed.save()
                }
                context = stack.context()
                let context = self.context
                table = try context.performAndWait {
                    let request = NSFetchRequest<NSManagedObject>(entityName: "Fruit")
                    request.sortDescriptors = [FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: "rank")]
                    let controller = NSFetchedResultsController(
                        fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "group", cacheName: nil)
                    return try LiveTable(controller: controller) { "\($0.string("name") ?? "?") #\($0.value(forKey: "rank") ?? "")" }
                }
                let web = WebTable(
                    table: table, title: "Fruit",
                    actions: [
                        .init(name: "delete", title: "Delete", key: "d", scope: .row) { object, context in
                            if let object { context.delete(object) }
                            try context.save()
                        },
                        .init(name: "fail", title: "Fail") { _, _ in throw CoreDataError(.managedObjectValidation, "the app refused") },
                    ], logger: Self.quietLogger)
                let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
                server = Task { try await web.run(port: 0) { portContinuation.yield($0) } }
                var iterator = ports.makeAsyncIterator()
                guard let port = await iterator.next() else { throw WebDriver.Failure(description: "the server did not start") }
                url = URL(string: "http://127.0.0.1:\(port)/")!
            }

            /// The server's log stays out of the test output (cancelling the server at each test's end logs an error).
            static var quietLogger: Logger {
                var logger = Logger(label: "WebTableBrowserTests")
                logger.logLevel = .critical
                return logger
            }

            static func model() throws -> NSManagedObjectModel {
                try NSManagedObjectModel {
                    Entity("Fruit") {
                        Attribute("name", .string, optional: false)
                        Attribute("group", .string, optional: false)
                        Attribute("rank", .integer64, default: 0)
                    }
                }
            }

            /// Runs `body` on the table's context and saves.
            func change(_ body: @escaping (NSManagedObjectContext) throws -> Void) throws {
                let context = self.context
                try context.performAndWait {
                    try body(context)
                    try context.save()
                }
            }

            /// The table as `[section name: [cell text]]`, read on its queue.
            func expected() -> [[String]] {
                context.performAndWait {
                    table.sections.indices.map { s in [table.sections[s].name] + table.rows(inSection: s, 0..<Int.max).map(\.text) }
                }
            }
        }

        /// The page's sections in screen order, each with its header and its rows' texts in screen order.
        static let readPage = """
            const sections = [...document.querySelectorAll("[data-section-name]")]
              .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top));
            return sections.map((s) => [s.dataset.sectionName].concat(
              [...s.querySelectorAll("[data-object-id]")].sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
                .map((r) => r.textContent)));
            """

        func page(_ browser: WebDriver) async throws -> [[String]] {
            try await browser.run(Self.readPage) as? [[String]] ?? []
        }

        func waitForPage(_ browser: WebDriver, toShow expected: [[String]], _ what: String) async throws {
            let deadline = Date().addingTimeInterval(30)
            var shown: [[String]] = []
            while Date() < deadline {
                shown = try await page(browser)
                if shown == expected { return }
                try await Task.sleep(nanoseconds: 20_000_000)
            }
            #expect(shown == expected, "\(what)")
        }

        /// Serves a table of `fruit` and runs `body` with it and a headless browser.
        ///
        /// What `body` throws is recorded, and the browser and the server stop either way. (The suite runs only where
        /// Chromium is installed.)
        func withServedTable(
            fruit: [(name: String, group: String, rank: Int)], _ body: (Served, WebDriver) async throws -> Void
        ) async throws {
            try #require(WebDriver.available, "Chromium and chromedriver are installed")
            let served = try await Served(fruit: fruit)
            defer { served.server.cancel() }
            let browser = try await WebDriver()
            do {
                try await body(served, browser)
            } catch {
                Issue.record(error)
            }
            await browser.quit()
        }

        @Test func thePageShowsTheTableAppliesChangesInEveryTabAndDeletesReachTheStore() async throws {
            try await withServedTable(fruit: [
                ("Apple", "Pome", 2), ("Pear", "Pome", 1), ("Cherry", "Stone", 1), ("Plum", "Stone", 3), ("Peach", "Stone", 2),
            ]) { served, browser in
                try await browser.open(served.url)
                try await waitForPage(browser, toShow: served.expected(), "the first screen")
                #expect(try await page(browser).first == ["Pome", "Pear #1", "Apple #2"])
                let titles = try await browser.run(##"return [...document.querySelectorAll("#index a")].map((a) => a.textContent)"##)
                #expect(titles as? [String] == ["P", "S"], "the section index")

                // A second tab sees the same list; a change in the server's context reaches both, in place.
                let first = try await browser.openTab()
                try await browser.open(served.url)
                try await waitForPage(browser, toShow: served.expected(), "the second tab")
                try await browser.run("window.before = document.querySelector('[data-section-name=\"Stone\"]'); return 0")
                let received = try await browser.run("return window.ocdTable.rowsReceived") as? Int
                try served.change { context in
                    try context.make("Fruit", ["name": "Apricot", "group": "Stone", "rank": 0])
                    try context.make("Fruit", ["name": "Quince", "group": "Quince", "rank": 1])
                    let plum = try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Fruit")).first { $0.string("name") == "Plum" }
                    plum?.setValue(-1, forKey: "rank")  // moves to the top of its section
                }
                let afterInsert = served.expected()
                #expect(afterInsert.map(\.first) == ["Pome", "Quince", "Stone"] && afterInsert[2][1] == "Plum #-1")
                try await waitForPage(browser, toShow: afterInsert, "the second tab after the change")
                let kept = try await browser.run("return window.before === document.querySelector('[data-section-name=\"Stone\"]')")
                #expect(kept as? Bool == true, "the section's element was kept: a batch, not a reload")
                let receivedAfter = try await browser.run("return window.ocdTable.rowsReceived") as? Int
                #expect(receivedAfter == received, "the batch carried what the page needed: no row was fetched again")
                try await browser.switchTo(first)
                try await waitForPage(browser, toShow: afterInsert, "the first tab after the change")

                // A delete clicked in the page reaches the store.
                try await browser.run(
                    "[...document.querySelectorAll('[data-object-id]')].find((r) => r.textContent === 'Pear #1').dataset.test = 'pick'; return 0"
                )
                try await browser.waitUntilStill()
                try await browser.click("[data-test=\"pick\"] span")  // selects the row, which shows its buttons
                try await browser.click(".row.selected button[data-action=\"delete\"]")
                var afterDelete = afterInsert
                afterDelete[0].removeAll { $0 == "Pear #1" }
                try await waitForPage(browser, toShow: afterDelete, "the page after the delete")
                // The page shows the delete as soon as the server's context processes it, its save a moment later.
                let expected = ["Apple", "Apricot", "Cherry", "Peach", "Plum", "Quince"]
                var stored: [String] = []
                let deadline = Date().addingTimeInterval(10)
                repeat {
                    stored = try served.stack.context().objects("Fruit").compactMap { $0.string("name") }.sorted()
                    if stored != expected { try await Task.sleep(nanoseconds: 50_000_000) }
                } while stored != expected && Date() < deadline
                #expect(stored == expected, "the delete was saved")
                #expect(try await browser.run("return window.ocdTable.errors") as? [String] == [])
            }
        }

        @Test func badMessagesAndFailingActionsAreShownAndTheServerKeepsServing() async throws {
            try await withServedTable(fruit: [("Apple", "Pome", 1)]) { served, browser in
                try await browser.open(served.url)
                try await waitForPage(browser, toShow: served.expected(), "the first screen")
                // A socket of the test's own sends what no page would; each gets an error naming it.
                let replies =
                    try await browser.runAsync(
                        """
                        const done = arguments[arguments.length - 1], replies = [];
                        const secret = document.querySelector('meta[name="ocd-secret"]').content;
                        const socket = new WebSocket("ws://" + location.host + "/changes?secret=" + secret);
                        const bad = ["not json", '{"t":"explode"}', '{"t":"action","name":"launch"}',
                          '{"t":"action","name":"delete","id":"x-coredata://nowhere/Fruit/p99"}', '{"t":"rows","s":"zero"}'];
                        socket.onmessage = (event) => {
                          const message = JSON.parse(event.data);
                          if (message.t === "hello") bad.forEach((text) => socket.send(text));
                          if (message.t === "error") replies.push(message.message);
                          if (replies.length === bad.length) { socket.close(); done(replies); }
                        };
                        """) as? [String] ?? []
                #expect(replies.count == 5, "\(replies)")
                let expectedParts = [
                    "malformed message", "unknown message type 'explode'", "unknown action 'launch'", "no object", "rows request",
                ]
                for (reply, part) in zip(replies, expectedParts) { #expect(reply.contains(part), "\(reply)") }

                // An action that throws is shown on the page, and the page still gets the next change.
                try await browser.click("button[data-action=\"fail\"]")
                try await browser.waitUntil("the error on the page", "return !document.getElementById('error').hidden")
                let shown = try await browser.run("return document.getElementById('error').textContent") as? String ?? ""
                #expect(shown.contains("Fail failed") && shown.contains("the app refused"), "\(shown)")
                try served.change { try $0.make("Fruit", ["name": "Quince", "group": "Pome", "rank": 2]) }
                try await waitForPage(browser, toShow: served.expected(), "the page after the errors")
            }
        }

        @Test func aLargeTableRendersOnlyTheRowsInViewAndFetchesOthersAsItScrolls() async throws {
            let count = 20_000
            try await withServedTable(fruit: (0..<count).map { ("Fruit \($0)", $0 < count / 2 ? "A" : "B", $0) }) { served, browser in
                try await browser.open(served.url)
                try await browser.waitUntil("the first rows", "return document.querySelectorAll('[data-object-id]').length > 10")
                let rendered = try await browser.run("return document.querySelectorAll('[data-object-id]').length") as? Int ?? 0
                let received = try await browser.run("return window.ocdTable.rowsReceived") as? Int ?? 0
                #expect(rendered < 200 && received <= 200, "only the rows near the view: \(rendered) elements, \(received) rows received")
                #expect(try await browser.run("return document.getElementById('status').textContent") as? String == "20000 rows")

                // Jumping to section B by its index title shows B's first rows, fetched by index path.
                try await browser.click("#index a[data-index-title=\"B\"]")
                try await browser.waitUntil(
                    "section B's first row",
                    "return [...document.querySelectorAll('[data-object-id]')].some((r) => r.textContent === 'Fruit 10000 #10000')")
                // Deeper into B; then deletes above the view (one in B, one in A) shift the rows the page holds, with no
                // row fetched again, and every row shown is the row the table has at that index path.
                try await browser.run("document.getElementById('scroller').scrollTop += 3000 * 28; return 0")
                try await browser.waitUntil(
                    "row 13000",
                    "return [...document.querySelectorAll('[data-object-id]')].some((r) => r.textContent === 'Fruit 13000 #13000')"
                )
                try await Task.sleep(nanoseconds: 300_000_000)  // rows requested for the new view have arrived
                let before = try await browser.run("return window.ocdTable.rowsReceived") as? Int ?? 0
                try served.change { context in
                    let request = NSFetchRequest<NSManagedObject>(entityName: "Fruit")
                    request.predicate = try FetchPredicate(format: "rank IN {5, 11000}")
                    for object in try context.fetch(request) { context.delete(object) }
                }
                try await browser.waitUntil("the deletes", "return document.getElementById('status').textContent === '19998 rows'")
                let after = try await browser.run("return window.ocdTable.rowsReceived") as? Int ?? 0
                #expect(after == before, "no rows fetched again for changes outside the view")
                let shown =
                    try await browser.run(
                        """
                        return [...document.querySelectorAll("[data-section-name='B'] [data-object-id]")]
                          .map((r) => [Math.round((parseFloat(r.style.top) - 30) / 28), r.textContent]);
                        """) as? [[Any]] ?? []
                #expect(shown.count > 10 && shown.count < 200, "\(shown.count) rows shown")
                let table = served.table
                let wrong = served.context.performAndWait {
                    shown.filter { pair in
                        guard let index = pair[0] as? Int, let text = pair[1] as? String else { return true }
                        return table.rows(inSection: 1, index..<(index + 1)).first?.text != text
                    }
                }
                #expect(wrong.isEmpty, "rows shown at the wrong index path: \(wrong.prefix(5))")
            }
        }
    }

    /// `coredata serve`, a process of its own, follows what other processes write to its store.
    @Suite struct ServeCommandBrowserTests {
        let dir = TemporaryDirectory()

        /// With and without persistent history (with it, the server merges the other processes' transactions).
        @Test(
            .enabled(if: Requirement.browserIsPresent, "needs Debian's chromium and chromium-driver"),
            .enabled(if: Requirement.executableIsBuilt("coredata"), "needs the coredata executable (swift build)"),
            arguments: [false, true])
        func servesAStoreAndShowsWhatOtherProcessesWrite(history: Bool) async throws {
            let url = dir.file("served-\(history).sqlite")
            try await servesAndShowsWhatOtherProcessesWrite(store: url.path, at: url, history: history)
        }

        /// `coredata serve --store postgresql://…`, with history: the same page, the same live changes.
        @Test(
            .enabled(if: Requirement.browserIsPresent, "needs Debian's chromium and chromium-driver"),
            .enabled(if: Requirement.executableIsBuilt("coredata"), "needs the coredata executable (swift build)"),
            .enabled(if: Requirement.postgresIsPresent, "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
        func servesAPostgreSQLStoreAndShowsWhatOtherProcessesWrite() async throws {
            let database = try PostgreSQLTestDatabase()
            try await servesAndShowsWhatOtherProcessesWrite(store: database.url.absoluteString, at: database.url, history: true)
        }

        func servesAndShowsWhatOtherProcessesWrite(store: String, at storeURL: URL, history: Bool) async throws {
            let tool = try #require(builtExecutable("coredata"))
            let model = Fixtures.url("Groceries.xcdatamodel").path
            func importing(_ json: String) throws {
                let file = dir.file("import-\(UUID().uuidString).json")
                try Data(json.utf8).write(to: file)
                let result = try ChildProcess.run(
                    tool.path,
                    ["import", "--model", model, "--store", store, "--entity", "Products"] + (history ? ["--history"] : []) + [file.path])
                #expect(result.status == 0, "\(result.output)")
            }
            try importing(#"[{"name": "Banana", "price": 185}, {"name": "Donut", "price": 156}, {"name": "Donut", "price": 701}]"#)
            let server = try ChildProcess(
                tool.path,
                [
                    "serve", "--model", model, "--store", store, "--entity", "Products", "--section-key", "name", "--sort", "name",
                    "--sort",
                    "price",
                    "--properties", "name,price", "--port", "0", "--interval", "20",
                ], captureOutput: true)
            defer { kill(server.pid, SIGTERM) }
            let banner = server.readOutput(timeout: 30) { $0.contains("(Ctrl-C stops)") }
            guard let portText = banner.components(separatedBy: "http://127.0.0.1:").last?.prefix(while: \.isNumber),
                let port = Int(portText)
            else {
                Issue.record("no port in \(banner)")
                return
            }
            let browser = try await WebDriver()
            do {
                try await browser.open(URL(string: "http://127.0.0.1:\(port)/")!)
                let page = WebTableBrowserTests()
                try await page.waitForPage(
                    browser, toShow: [["Banana", "Banana  185"], ["Donut", "Donut  156", "Donut  701"]], "the store")

                // Another process imports; then this one (a process apart from the server too) updates and deletes.
                try importing(#"[{"name": "Apricot", "price": 3}, {"name": "Donut", "price": 300}]"#)
                try await page.waitForPage(
                    browser,
                    toShow: [["Apricot", "Apricot  3"], ["Banana", "Banana  185"], ["Donut", "Donut  156", "Donut  300", "Donut  701"]],
                    "the page after another process's import")
                let container = NSPersistentContainer(
                    name: "Writer", managedObjectModel: try NSManagedObjectModel(contentsOf: URL(fileURLWithPath: model)))
                container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: storeURL)]
                try container.loadPersistentStores()
                let writer = container.newBackgroundContext()
                try writer.performAndWait {
                    let products = try writer.fetch(NSFetchRequest<NSManagedObject>(entityName: "Products"))
                    products.first { $0.value(forKey: "price") as? Int == 701 }?.setValue(1, forKey: "price")  // moves to the top of Donut
                    if let banana = products.first(where: { $0.string("name") == "Banana" }) { writer.delete(banana) }
                    try writer.save()
                }
                try await page.waitForPage(
                    browser, toShow: [["Apricot", "Apricot  3"], ["Donut", "Donut  1", "Donut  156", "Donut  300"]],
                    "the page after an update and a delete")
            } catch {
                Issue.record(error)
            }
            await browser.quit()
            kill(server.pid, SIGTERM)
            #expect(server.wait(timeout: 20) == 0, "SIGTERM stops the server cleanly")
        }
    }
}
