import Foundation
import Logging
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

extension NSFetchedResultsController {
    // MARK: Delegate delivery

    /// The controller as delegates see it.
    var erased: NSFetchedResultsController<any NSFetchRequestResult> {
        if let me = self as? NSFetchedResultsController<any NSFetchRequestResult> { return me }
        if let view = erasedView { return view }
        let view = NSFetchedResultsController<any NSFetchRequestResult>(
            engine: engine, request: request, context: managedObjectContext, sectionNameKeyPath: sectionNameKeyPath, cacheName: cacheName)
        view.primary = self
        erasedView = view
        return view
    }

    /// Starts following the context's changes after a fetch made without tracking (a delegate or a `changes`
    /// sequence arrived later); a failure is reported, not thrown (the setter that starts it cannot throw).
    func startTracking() {
        do {
            try managedObjectContext.performAndWait { try engine.performFetch(tracking: true) }
        } catch {
            reportFailure(error, "start tracking changes")
        }
    }

    /// Logs a failure the controller could not throw and tells the delegate.
    func reportFailure(_ error: any Error, _ activity: String) {
        let primary = (self.primary as? NSFetchedResultsController<ResultType>) ?? self
        primary.logger.error(
            "Could not \(activity) for entity \(engine.entity.name): \(error)",
            metadata: ["entity": .string(engine.entity.name), "cacheName": .string(cacheName ?? "")])
        delegate?.controller(erased, didFailWith: error)
    }

    func report(_ batch: ChangeBatch<RowKey>, _ objects: [RowKey: NSManagedObject]) {
        let values =
            subscribers.isEmpty && !(delegate is any NSFetchedResultsControllerSnapshotDelegate)
                && !(delegate is any NSFetchedResultsControllerDifferenceDelegate) ? nil : changeSet(batch, objects)
        if let values { subscribers.yield(values) }
        guard let delegate else { return }
        let controller = erased
        if let snapshotDelegate = delegate as? any NSFetchedResultsControllerSnapshotDelegate, let values {
            snapshotDelegate.controller(controller, didChangeContentWith: values.snapshot)
            return
        }
        if sectionNameKeyPath == nil, let differenceDelegate = delegate as? any NSFetchedResultsControllerDifferenceDelegate, let values,
            let diff = difference(values)
        {
            differenceDelegate.controller(controller, didChangeContentWith: diff)
            return
        }
        delegate.controllerWillChangeContent(controller)
        for change in batch.sections {
            let info = SectionInfo(
                name: change.name, indexTitle: indexTitle(forSectionName: change.name), engine: engine, start: 0, count: 0)
            delegate.controller(controller, didChange: info, atSectionIndex: change.index, for: change.type)
        }
        for change in batch.rows {
            guard let object = objects[change.id] else { continue }
            switch change.type {
            case .insert: delegate.controller(controller, didChange: object, at: nil, for: .insert, newIndexPath: change.to)
            case .delete: delegate.controller(controller, didChange: object, at: change.from, for: .delete, newIndexPath: nil)
            case .move: delegate.controller(controller, didChange: object, at: change.from, for: .move, newIndexPath: change.to)
            case .update: delegate.controller(controller, didChange: object, at: change.from, for: .update, newIndexPath: change.to)
            }
        }
        delegate.controllerDidChangeContent(controller)
    }
}
