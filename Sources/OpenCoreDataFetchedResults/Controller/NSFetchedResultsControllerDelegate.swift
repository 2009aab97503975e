import Foundation
import Logging
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

/// One section of a fetched results controller's results.
///
/// For example:
/// ```swift
/// let title = controller.sections?[0].name   // the section's name
/// let rows = controller.sections?[0].numberOfObjects ?? 0
/// ```
public protocol NSFetchedResultsSectionInfo {
    /// The section's name: the value of the section key path for its objects ("" with no key path).
    var name: String { get }
    /// The section's index title.
    var indexTitle: String? { get }
    /// How many objects the section holds.
    var numberOfObjects: Int { get }
    /// The section's objects.
    var objects: [Any]? { get }
}

/// What a controller tells its delegate as the results change, in UITableView batch-update terms.
///
/// Every method has a default that does nothing, so implement only what you use. Delegate methods receive the
/// controller typed as `NSFetchedResultsController<any NSFetchRequestResult>` (as Core Data's Swift API spells it);
/// cast objects to your class.
///
/// For example:
/// ```swift
/// final class ListModel: NSFetchedResultsControllerDelegate {
///     func controllerDidChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) { redraw() }
/// }
/// ```
public protocol NSFetchedResultsControllerDelegate: AnyObject {
    /// A batch of changes is about to be reported (call `beginUpdates()`).
    func controllerWillChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>)
    /// A section was inserted (index after the batch) or deleted (index before the batch).
    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange sectionInfo: any NSFetchedResultsSectionInfo,
        atSectionIndex sectionIndex: Int, for type: NSFetchedResultsChangeType)
    /// An object was inserted (`newIndexPath`), deleted (`indexPath`), moved (`indexPath` → `newIndexPath`) or
    /// updated (`indexPath`, the row's index before the batch).
    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange anObject: Any, at indexPath: IndexPath?,
        for type: NSFetchedResultsChangeType, newIndexPath: IndexPath?)
    /// The batch is complete (call `endUpdates()`).
    func controllerDidChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>)
    /// The index title for a section; nil uses the controller's `sectionIndexTitle(forSectionName:)`.
    func controller(_ controller: NSFetchedResultsController<any NSFetchRequestResult>, sectionIndexTitleForSectionName sectionName: String)
        -> String?
    /// The controller could not follow a change: a re-fetch failed (the store could not be read), tracking could not
    /// start, or the section cache could not be written.
    ///
    /// Core Data has no such method; OpenCoreData reports these failures instead of dropping them. The results stay
    /// as the delegate last saw them, and the next change the context reports makes the controller re-fetch and
    /// report the whole difference, so nothing is missed once the store can be read again. The failure is also
    /// logged to the controller's `logger`.
    ///
    /// For example:
    /// ```swift
    /// func controller(_ controller: NSFetchedResultsController<any NSFetchRequestResult>, didFailWith error: any Error) {
    ///     showBanner("The list may be out of date: \(error)")
    /// }
    /// ```
    func controller(_ controller: NSFetchedResultsController<any NSFetchRequestResult>, didFailWith error: any Error)
}

extension NSFetchedResultsControllerDelegate {
    /// Does nothing by default.
    public func controllerWillChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {}
    /// Does nothing by default.
    public func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange sectionInfo: any NSFetchedResultsSectionInfo,
        atSectionIndex sectionIndex: Int, for type: NSFetchedResultsChangeType
    ) {}
    /// Does nothing by default.
    public func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange anObject: Any, at indexPath: IndexPath?,
        for type: NSFetchedResultsChangeType, newIndexPath: IndexPath?
    ) {}
    /// Does nothing by default.
    public func controllerDidChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {}
    /// Nil by default: the controller makes the title from the section name, as Core Data does.
    public func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, sectionIndexTitleForSectionName sectionName: String
    )
        -> String?
    { nil }
    /// Does nothing by default: failures still go to the controller's logger.
    public func controller(_ controller: NSFetchedResultsController<any NSFetchRequestResult>, didFailWith error: any Error) {}
}

/// A section's information, read from the engine when asked.
struct SectionInfo: NSFetchedResultsSectionInfo {
    let name: String
    let indexTitle: String?
    let engine: ResultsEngine
    let start: Int
    let count: Int

    var numberOfObjects: Int { count }
    var objects: [Any]? { engine.objects(in: start..<(start + count)) }
}
