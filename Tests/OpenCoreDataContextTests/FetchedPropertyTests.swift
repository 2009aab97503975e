import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Fetched properties as Xcode writes them: evaluated when read with `$FETCH_SOURCE` (and its key paths), kept until
/// the object is refreshed, read-only, never stored; a predicate that does not parse stops neither the model nor the
/// store, only the read.
@Suite struct FetchedPropertyTests {
    let dir = TemporaryDirectory()

    func model() throws -> NSManagedObjectModel {
        try dir.loadModel(
            "Shop",
            """
                <entity name="Maker" representedClassName="Maker" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String"/>
                </entity>
                <entity name="Product" representedClassName="Product" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String"/>
                    <attribute name="price" optional="YES" attributeType="Double" defaultValueString="0.0"/>
                    <attribute name="searchName" optional="YES" attributeType="String" derived="YES" derivationExpression="canonical:(name)"/>
                    <relationship name="maker" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Maker"/>
                    <fetchedProperty name="sameMaker" optional="YES">
                        <fetchRequest name="fetchedPropertyFetchRequest" entity="Product" predicateString="maker == $FETCH_SOURCE.maker AND SELF != $FETCH_SOURCE"/>
                    </fetchedProperty>
                    <fetchedProperty name="cheaper" optional="YES">
                        <fetchRequest name="fetchedPropertyFetchRequest" entity="Product" predicateString="price &lt; $FETCH_SOURCE.price"/>
                    </fetchedProperty>
                    <fetchedProperty name="broken" optional="YES">
                        <fetchRequest name="fetchedPropertyFetchRequest" entity="Product" predicateString="price &lt; &lt; 3"/>
                    </fetchedProperty>
                </entity>
                <fetchRequest name="CheapNamed" entity="Product" predicateString="price &lt; $LIMIT AND name BEGINSWITH[c] $PREFIX" fetchLimit="5"/>
            """)
    }

    /// A store's model cache (`Z_MODELCACHE`, the compiled model Core Data keeps in the store) carries fetched
    /// properties, fetch request templates and derived attributes, their predicates and expressions archived as Apple's
    /// classes: a model read back from the store alone has them.
    @Test func theModelCacheKeepsFetchedPropertiesTemplatesAndDerivations() throws {
        let model = try model()
        let stack = try TestStack(model: model)
        let cached = try NSManagedObjectModel.cachedModel(ofStoreAt: stack.storeURL)
        let product = try #require(cached.entitiesByName["Product"])
        let cheaper = try #require(product.propertiesByName["cheaper"] as? NSFetchedPropertyDescription)
        #expect(cheaper.fetchRequestTemplate.entityName == "Product")
        let format = try #require(cheaper.fetchRequestTemplate.predicateFormat)
        #expect(try FetchPredicate(format: format) == FetchPredicate(format: "price < $FETCH_SOURCE.price"), "\(format)")
        // A fetched property whose predicate does not parse cannot be archived: it is left out, not written wrong.
        #expect(product.propertiesByName["sameMaker"] is NSFetchedPropertyDescription && product.propertiesByName["broken"] == nil)
        #expect(product.attributesByName["searchName"]?.derivationExpression == "canonical:(name)")
        let template = try #require(cached.fetchRequestTemplateDescriptions["CheapNamed"])
        #expect(template.entityName == "Product" && template.fetchLimit == 5)
        let templateFormat = try #require(template.predicateFormat)
        #expect(try FetchPredicate(format: templateFormat) == FetchPredicate(format: "price < $LIMIT AND name BEGINSWITH[c] $PREFIX"))
        // The cache still describes the same store: the version hashes are unchanged.
        #expect(cached.entityVersionHashesByName == model.entityVersionHashesByName)
    }

    func names(_ value: Any?) -> [String] { ((value as? [NSManagedObject]) ?? []).compactMap { $0.string("name") }.sorted() }

    @Test func fetchedPropertiesFetchWithTheSourceObjectAndAreKeptUntilRefresh() throws {
        let model = try model()
        let property = try #require(model.entitiesByName["Product"]?.propertiesByName["cheaper"] as? NSFetchedPropertyDescription)
        #expect(property.fetchRequestTemplate.entityName == "Product" && property.isTransient)
        #expect(property.fetchRequest?.predicate != nil)
        let stack = try TestStack(model: model)
        let context = stack.context()
        try context.performAndWait {
            let acme = try context.make("Maker", ["name": "acme"])
            let other = try context.make("Maker", ["name": "other"])
            let anvil = try context.make("Product", ["name": "anvil", "price": 50.0, "maker": acme])
            try context.make("Product", ["name": "rocket", "price": 500.0, "maker": acme])
            try context.make("Product", ["name": "spring", "price": 5.0, "maker": other])
            try context.save()
            #expect(names(anvil.value(forKey: "sameMaker")) == ["rocket"])
            #expect(names(anvil.value(forKey: "cheaper")) == ["spring"])
            // Kept: a new cheaper product is not seen until the object is refreshed.
            try context.make("Product", ["name": "pebble", "price": 1.0, "maker": other])
            try context.save()
            #expect(names(anvil.value(forKey: "cheaper")) == ["spring"])
            context.refresh(anvil, mergeChanges: true)
            #expect(names(anvil.value(forKey: "cheaper")) == ["pebble", "spring"])
            // Read-only, and a predicate that does not parse is an error only when read.
            let setError = #expect(throws: CoreDataError.self) { try anvil.setCheckedValue([anvil], forKey: "cheaper") }
            #expect(setError?.message.contains("read-only") == true)
            let readError = #expect(throws: CoreDataError.self) { try anvil.checkedValue(forKey: "broken") }
            #expect(readError?.message.contains("Product.broken") == true, "\(readError?.message ?? "")")
            #expect(anvil.committedValues(forKeys: nil)["price"] as? Double == 50)
        }
    }

    @Test(.enabled(if: Requirement.corpusIsPresent, "needs ../shared/corpus beside the checkout"))
    func corpusModelsWithFetchedPropertiesLoad() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../../shared/corpus/models/leanne63-example.xcdatamodeld").standardizedFileURL
        try #require(FileManager.default.fileExists(atPath: corpus.path), "the corpus is there")
        let model = try NSManagedObjectModel(contentsOf: corpus)
        let stack = try TestStack(model: model)
        let context = stack.context()
        try context.performAndWait {
            let product = try #require(model.entitiesByName["Product"])
            let fetched = product.properties.compactMap { $0 as? NSFetchedPropertyDescription }
            #expect(fetched.contains { $0.name == "allProductsFromManufacturer" })
            // An unsaved object: the fetch sees pending changes, so it finds the object itself among those that match.
            let object = NSManagedObject(entity: product, insertInto: context)
            for property in fetched where property.fetchRequestTemplate.predicateFormat?.contains("$FETCH_SOURCE") == true {
                let value = try object.checkedValue(forKey: property.name) as? [NSManagedObject]
                #expect(value != nil, "\(property.name)")
            }
        }
    }
}

/// Derived attributes as Xcode writes them: computed from their expression at every save of the object.
@Suite struct DerivedAttributeTests {
    let dir = TemporaryDirectory()

    @Test func derivedAttributesAreComputedAtSave() throws {
        let model = try dir.loadModel(
            "Blog",
            """
                <entity name="Blog" representedClassName="Blog" syncable="YES">
                    <attribute name="title" optional="YES" attributeType="String"/>
                    <attribute name="postCount" optional="YES" attributeType="Integer 64" derived="YES" derivationExpression="posts.@count"/>
                    <attribute name="searchTitle" optional="YES" attributeType="String" derived="YES" derivationExpression="canonical:(title)"/>
                    <attribute name="touched" optional="YES" attributeType="Date" derived="YES" derivationExpression="now()"/>
                    <relationship name="posts" optional="YES" toMany="YES" deletionRule="Cascade" destinationEntity="Post" inverseName="blog"/>
                </entity>
                <entity name="Post" representedClassName="Post" syncable="YES">
                    <attribute name="words" optional="YES" attributeType="Integer 32"/>
                    <attribute name="blogTitle" optional="YES" attributeType="String" derived="YES" derivationExpression="blog.title"/>
                    <relationship name="blog" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Blog" inverseName="posts"/>
                </entity>
            """)
        #expect(model.entitiesByName["Blog"]?.attributesByName["postCount"]?.derivationExpression == "posts.@count")
        let stack = try TestStack(model: model)
        let context = stack.context()
        let before = Date()
        try context.performAndWait {
            let blog = try context.make("Blog", ["title": "Café Notes"])
            let post = try context.make("Post", ["words": 10, "blog": blog])
            try context.make("Post", ["words": 20, "blog": blog])
            try context.save()
            #expect(blog.value(forKey: "postCount") as? Int == 2)
            #expect(blog.string("searchTitle") == "cafe notes")
            #expect((blog.value(forKey: "touched") as? Date).map { $0 >= before } == true)
            #expect(post.string("blogTitle") == "Café Notes")
            context.delete(post)
            try context.save()
            #expect(blog.value(forKey: "postCount") as? Int == 1, "recomputed when a post goes")
        }
        let reader = stack.context()
        let stored = try reader.performAndWait { try reader.objects("Blog").first?.value(forKey: "postCount") as? Int }
        #expect(stored == 1, "the derived value is stored")
    }
}

/// Configurations as Xcode writes them: their member entities, and a store description naming one.
@Suite struct ConfigurationTests {
    let dir = TemporaryDirectory()

    @Test func configurationsListTheirEntities() throws {
        let model = try dir.loadModel(
            "Configured",
            """
                <entity name="Local" representedClassName="Local" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String"/>
                </entity>
                <entity name="Synced" representedClassName="Synced" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String"/>
                </entity>
                <configuration name="Cloud" usedWithCloudKit="YES">
                    <memberEntity name="Synced"/>
                </configuration>
            """)
        #expect(model.configurations == ["Cloud"])
        #expect(model.entities(forConfigurationName: "Cloud")?.map(\.name) == ["Synced"])
        #expect(model.entities(forConfigurationName: nil)?.count == 2 && model.entities(forConfigurationName: "Nope") == nil)
        let description = NSPersistentStoreDescription(url: dir.file("c.sqlite"))
        description.configuration = "Clouds"
        let container = NSPersistentContainer(name: "C", managedObjectModel: model)
        container.persistentStoreDescriptions = [description]
        let error = #expect(throws: CoreDataError.self) { try container.loadPersistentStores() }
        #expect(error?.message.contains("'Clouds'") == true && error?.message.contains("Cloud") == true)
        description.configuration = "Cloud"
        try container.loadPersistentStores()
        #expect(container.persistentStoreCoordinator.persistentStores.count == 1)
        let broken = #expect(throws: CoreDataError.self) {
            _ = try dir.loadModel(
                "Broken", #"<entity name="A" syncable="YES"/><configuration name="X"><memberEntity name="B"/></configuration>"#)
        }
        #expect(broken?.message.contains("'B'") == true)
    }
}
