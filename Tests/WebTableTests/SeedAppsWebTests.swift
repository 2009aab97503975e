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

extension BrowserTests {
    /// The seed apps' `--web`, as processes of their own: the view context on the main queue, the page's buttons saving
    /// through it and through a background context.
    @Suite struct SeedAppsWebTests {
        let dir = TemporaryDirectory()

        /// Starts `app --store STORE --web --port 0` and returns it with its page's URL.
        func serve(_ app: URL, store: String) throws -> (ChildProcess, URL)? {
            let process = try ChildProcess(app.path, ["--store", store, "--web", "--port", "0"], captureOutput: true)
            let banner = process.readOutput(timeout: 30) { $0.contains("(Ctrl-C stops)") }
            guard let port = banner.components(separatedBy: "http://127.0.0.1:").last?.prefix(while: \.isNumber), !port.isEmpty else {
                Issue.record("no port in \(banner)")
                return nil
            }
            return (process, URL(string: "http://127.0.0.1:\(port)/")!)
        }

        @Test(
            .enabled(if: Requirement.browserIsPresent, "needs Debian's chromium and chromium-driver"),
            .enabled(if: Requirement.executableIsBuilt("oil-changes"), "needs the oil-changes executable (swift build)"))
        func oilChangesAddsInBothContextsAndDeletesFromThePage() async throws {
            let app = try #require(builtExecutable("oil-changes"))
            let store = dir.file("oil.sqlite").path
            guard let (server, url) = try serve(app, store: store) else { return }
            defer { kill(server.pid, SIGKILL) }
            let browser = try await WebDriver()
            let rows = "return document.querySelectorAll('[data-object-id]').length"
            do {
                try await browser.open(url)
                try await browser.waitUntil("the empty table", "return document.getElementById('status').textContent === '0 rows'")
                try await browser.click("button[data-action=\"add\"]")
                try await browser.waitUntil("the added row", "\(rows) === 1")
                try await browser.click("button[data-action=\"background-add\"]")
                try await browser.waitUntil("the row added in the background and merged", "\(rows) === 2")
                // The row added in the view context reached the page under a temporary ID; its save replaced it.
                try await browser.waitUntil(
                    "permanent IDs",
                    "return [...document.querySelectorAll('[data-object-id]')].every((r) => r.dataset.objectId.includes('/p'))"
                )
                let texts = try await browser.run(
                    "return [...document.querySelectorAll('[data-object-id] span')].map((s) => s.textContent)")
                #expect((texts as? [String])?.allSatisfy { $0.contains("Oil change") } == true, "\(String(describing: texts))")
                try await browser.waitUntilStill()
                try await browser.click("[data-object-id] span")
                try await browser.click(".row.selected button[data-action=\"delete\"]")
                try await browser.waitUntil("the delete", "\(rows) === 1")
            } catch {
                Issue.record(error)
            }
            await browser.quit()
            kill(server.pid, SIGTERM)
            #expect(server.wait(timeout: 20) == 0, "SIGTERM stops the app cleanly")
            let printed = try ChildProcess.run(app.path, ["--store", store])
            #expect(printed.output.hasPrefix("rows: 1\n"), "the store kept what the page did: \(printed.output)")
        }

        /// `oil-changes --store postgresql://… --web` in two processes: one list, live in both browsers — a row added
        /// on one page appears on the other, a row deleted on the other goes from the first.
        @Test(
            .enabled(if: Requirement.browserIsPresent, "needs Debian's chromium and chromium-driver"),
            .enabled(if: Requirement.executableIsBuilt("oil-changes"), "needs the oil-changes executable (swift build)"),
            .enabled(if: Requirement.postgresIsPresent, "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
        func twoOilChangesOnOnePostgreSQLStoreShowOneLiveList() async throws {
            let app = try #require(builtExecutable("oil-changes"))
            let database = try PostgreSQLTestDatabase()
            let store = database.url.absoluteString
            guard let (first, firstURL) = try serve(app, store: store) else { return }
            defer { kill(first.pid, SIGKILL) }
            guard let (second, secondURL) = try serve(app, store: store) else { return }
            defer { kill(second.pid, SIGKILL) }
            let one = try await WebDriver()
            let other = try await WebDriver()
            let rows = "return document.querySelectorAll('[data-object-id]').length"
            do {
                try await one.open(firstURL)
                try await other.open(secondURL)
                for browser in [one, other] {
                    try await browser.waitUntil("the empty table", "return document.getElementById('status').textContent === '0 rows'")
                }
                try await one.click("button[data-action=\"add\"]")
                try await one.waitUntil("the added row", "\(rows) === 1")
                try await other.waitUntil("the row the other process added", "\(rows) === 1")
                try await other.click("button[data-action=\"background-add\"]")
                try await other.waitUntil("the second row", "\(rows) === 2")
                try await one.waitUntil("the row the other process added in the background", "\(rows) === 2")
                try await other.waitUntilStill()
                try await other.click("[data-object-id] span")
                try await other.click(".row.selected button[data-action=\"delete\"]")
                try await other.waitUntil("the delete", "\(rows) === 1")
                try await one.waitUntil("the row the other process deleted gone", "\(rows) === 1")
            } catch {
                Issue.record(error)
            }
            await one.quit()
            await other.quit()
            #expect(try database.execute("SELECT count(*) FROM zentry") == [["1"]])
        }

        @Test(
            .enabled(if: Requirement.browserIsPresent, "needs Debian's chromium and chromium-driver"),
            .enabled(if: Requirement.executableIsBuilt("groceries"), "needs the groceries executable (swift build)"))
        func groceriesScrollsToTheProductItAdds() async throws {
            let app = try #require(builtExecutable("groceries"))
            guard let (server, url) = try serve(app, store: dir.file("groceries.sqlite").path) else { return }
            defer { kill(server.pid, SIGKILL) }
            let browser = try await WebDriver(width: 800, height: 400)
            do {
                try await browser.open(url)
                try await browser.waitUntil("the products", "return document.getElementById('status').textContent === '30 rows'")
                let titles = try await browser.run(##"return [...document.querySelectorAll("#index a")].map((a) => a.textContent)"##)
                #expect(titles as? [String] == ["B", "C", "D", "F", "M", "P", "S"], "the section index")
                // Far from wherever the new product lands: the other end of the list.
                try await browser.run("const s = document.getElementById('scroller'); s.scrollTop = s.scrollHeight; return 0")
                let top = try await browser.run("return document.getElementById('scroller').scrollTop") as? Double ?? 0
                try await browser.run(
                    "window.before = new Set([...document.querySelectorAll('[data-object-id]')].map((r) => r.dataset.objectId)); return 0")
                try await browser.click("button[data-action=\"add\"]")
                try await browser.waitUntil("the new product", "return document.getElementById('status').textContent === '31 rows'")
                try await browser.waitUntil(
                    "the new product in view",
                    """
                    const view = document.getElementById('scroller').getBoundingClientRect();
                    return [...document.querySelectorAll('[data-object-id]')].some((row) => {
                      const box = row.getBoundingClientRect();
                      return !window.before.has(row.dataset.objectId) && box.top >= view.top && box.bottom <= view.bottom;
                    });
                    """)
                let moved = try await browser.run("return document.getElementById('scroller').scrollTop") as? Double ?? 0
                print("SeedAppsWebTests: scrolled from \(top) to \(moved) for the new product")
            } catch {
                Issue.record(error)
            }
            await browser.quit()
        }
    }
}
