import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Real model bundles from public apps and libraries (`../shared/corpus/models`, beside the checkout; not part of the
/// project): every one that loads must also work in a store, and the set that loads may only grow.
///
/// Without the corpus the suite is skipped, saying why.
@Suite(.enabled(if: Requirement.corpusIsPresent, "needs ../shared/corpus beside the checkout")) struct CorpusModelTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../../shared/corpus/models").standardizedFileURL

    /// The bundles that load and work in a store today: all but the one in Xcode 3's format, which stays refused.
    static let loading: Set<String> = [
        "apple-cloudkitdemo.xcdatamodeld", "apple-coredatasync-cloudkit.xcdatamodeld",
        "apple-datesectiontitles.xcdatamodeld", "apple-earthquakes.xcdatamodeld",
        "coredatabooks-swiftui.xcdatamodeld", "coredataplus-sample.xcdatamodeld", "corestore-colors.xcdatamodeld",
        "corestore-evolution.xcdatamodeld", "corestore-tests.xcdatamodeld", "ddg-bookmarks.xcdatamodeld",
        "ddg-browsinghistory.xcdatamodeld", "earthquakes-cloudkit-config.xcdatamodeld", "kiwix.xcdatamodeld",
        "leanne63-example.xcdatamodeld", "magicalrecord-testmodel.xcdatamodeld", "mastodon.xcdatamodeld",
        "mogenerator-swifttest.xcdatamodeld", "mogenerator-test.xcdatamodel", "momxml-composite.xcdatamodeld",
        "momxml-fixture.xcdatamodeld", "restkit-search.xcdatamodeld", "restkit-versioned.xcdatamodeld",
        "simplenote.xcdatamodeld", "wikipedia.xcdatamodeld", "wire-zmessaging.xcdatamodeld",
    ]

    @Test func everyModelThatLoadsWorksInAStoreAndNoneThatLoadedIsRefused() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.corpus.path)
        var loaded: Set<String> = []
        for name in names.sorted() where name.hasSuffix(".xcdatamodeld") || name.hasSuffix(".xcdatamodel") {
            let url = Self.corpus.appendingPathComponent(name)
            let model: NSManagedObjectModel
            do {
                model = try NSManagedObjectModel(contentsOf: url)
            } catch let error as CoreDataError {
                // A refusal names the file it read; Xcode 3's format is named as such, with what to do.
                #expect(error.message.contains(".xcdatamodel"), "\(name): \(error.message)")
                if name.contains("xcode3") { #expect(error.message.contains("Xcode 3") && error.message.contains("save it")) }
                print("CorpusModelTests: \(name) refused: \(error.message)")
                continue
            }
            // It works in a store: each concrete entity's table exists, a count and a fetch run.
            let stack: TestStack
            do {
                stack = try TestStack(model: model)
            } catch let error as CoreDataError {
                print("CorpusModelTests: \(name) loads, but the store refuses it: \(error.message)")
                continue
            }
            loaded.insert(name)
            let context = stack.context()
            try context.performAndWait {
                for entity in model.entities where !entity.isAbstract {
                    let request = NSFetchRequest<NSManagedObject>(entityName: entity.name)
                    let count = try context.count(for: request)
                    let fetched = try context.fetch(request)
                    #expect(count == 0 && fetched.isEmpty, "\(name): \(entity.name)")
                }
            }
        }
        let lost = Self.loading.subtracting(loaded)
        #expect(lost.isEmpty, "models that loaded before and no longer do: \(lost.sorted())")
        print("CorpusModelTests: \(loaded.count) of \(names.count - 1) bundles load: \(loaded.sorted())")
    }

    @Test func booleanDefaultsWrittenAsNumbersAndABundleWithoutACurrentVersion() throws {
        try #require(FileManager.default.fileExists(atPath: Self.corpus.path), "the corpus is there")
        // Kiwix writes `defaultValueString="0.0"` for a Boolean, as Xcode's number field does.
        let kiwix = try NSManagedObjectModel(contentsOf: Self.corpus.appendingPathComponent("kiwix.xcdatamodeld"))
        let isMissing = kiwix.entitiesByName["ZimFile"]?.attributesByName["isMissing"]
        #expect(isMissing?.defaultValue == .bool(false))
        // CoreStore's evolution demo has two versions and an empty .xccurrentversion: the original one is current.
        let evolution = try NSManagedObjectModel(contentsOf: Self.corpus.appendingPathComponent("corestore-evolution.xcdatamodeld"))
        let original = try NSManagedObjectModel(
            contentsOf: Self.corpus.appendingPathComponent("corestore-evolution.xcdatamodeld/Advanced.EvolutionDemo.xcdatamodel"))
        #expect(evolution.entityVersionHashesByName == original.entityVersionHashesByName)
    }
}
