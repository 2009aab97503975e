import Foundation
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

// Changes to objects of other entities that the predicate, sorts or section key read through relationships.
extension ResultsEngine {
    // MARK: Related objects

    func computeRelatedChains() {
        var paths = sorts.map(\.key)
        if let sectionKeyPath { paths.append(sectionKeyPath) }
        if let predicate { paths += predicate.referencedKeyPaths }
        var chains: [[NSRelationshipDescription]] = []
        for path in paths {
            // Every prefix of the relationships the path goes through is a chain a related change can travel.
            guard let relationships = try? entity.resolveKeyPath(path).relationships else { continue }
            for length in relationships.indices {
                let chain = Array(relationships[...length])
                if !chains.contains(where: { $0.elementsEqual(chain, by: ===) }) { chains.append(chain) }
            }
        }
        relatedChains = chains
    }

    /// The objects of the controller's entity that reach `object` through one of the chains, found by walking inverse
    /// relationships back; nil when a chain has no inverse (then only a re-fetch can tell).
    func owners(of object: NSManagedObject) -> [NSManagedObject]? {
        var found: [ObjectIdentifier: NSManagedObject] = [:]
        for chain in relatedChains {
            guard let last = chain.last?.destinationEntity, object.entity.isKindOf(entity: last) else { continue }
            var level: [NSManagedObject] = [object]
            for relationship in chain.reversed() {
                guard let inverse = relationship.inverseRelationship else { return nil }
                var next: [NSManagedObject] = []
                for item in level {
                    switch (try? item.checkedValue(forKey: inverse.name)) ?? nil {
                    case let one as NSManagedObject: next.append(one)
                    case let many as Set<NSManagedObject>: next.append(contentsOf: many)
                    default: break
                    }
                }
                level = next
            }
            for owner in level where isCandidateKind(owner) { found[ObjectIdentifier(owner)] = owner }
        }
        return Array(found.values)
    }
}
