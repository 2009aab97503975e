import Foundation

/// A recorder of operations that can be undone and redone: Foundation's `UndoManager`, which Foundation on Linux does
/// not have.
///
/// Code written for Apple's platforms uses it unchanged — a context's `undoManager`, a SwiftData model context's, or
/// an app's own — with Foundation's semantics:
/// ```swift
/// context.undoManager = UndoManager()
/// item.setValue("Pears", forKey: "name")
/// context.undo()                     // the name it had before
/// context.redo()                     // "Pears" again
/// ```
/// Operations are registered as closures (`registerUndo(withTarget:handler:)`) and kept in groups: undoing a group runs
/// its operations newest first, and what they register meanwhile becomes the group to redo. Registering anything
/// outside an undo or redo clears the redo stack.
///
/// What differs from Apple's, because Linux has no application event loop:
/// - With `groupsByEvent` (the default), a registration made while no group is open opens one. Apple closes that group
///   when the run loop's pass ends; here it closes at the next checkpoint: when a context that uses this undo manager
///   has processed its pending changes (so each of its events is one step to undo, as in an app where each event is one
///   pass of the run loop), or at `undo()`, `redo()` or `endUndoGrouping()`. Group several events into one step with
///   `beginUndoGrouping()` and `endUndoGrouping()`.
/// - Misuse Apple reports by raising an exception (closing a group that is not open, undoing with nested groups open,
///   enabling registration more often than it was disabled) is ignored here.
/// - There are no selector- or invocation-based registrations (`registerUndo(withTarget:selector:object:)`,
///   `prepare(withInvocationTarget:)`): Linux has no Objective-C runtime. `runLoopModes` does not exist.
///
/// Apple's class is bound to the main actor; this one is not, but it is not thread-safe either: use an undo manager
/// from one thread (or actor) at a time, and a context's undo manager on that context's queue.
open class UndoManager {
    /// The undo manager keeps targets weakly, as Apple's keeps them unowned: an operation whose target is gone is
    /// skipped.
    private struct Operation {
        weak var target: AnyObject?
        let run: (AnyObject) -> Void
    }

    private enum Entry {
        case operation(Operation)
        case group(Group)
    }

    private final class Group {
        var entries: [Entry] = []
        var actionName = ""
        var isDiscardable = false
        /// Opened by a registration while no group was open (`groupsByEvent`), not by `beginUndoGrouping()`.
        let isAutomatic: Bool

        init(isAutomatic: Bool) { self.isAutomatic = isAutomatic }

        var isEmpty: Bool {
            entries.allSatisfy {
                switch $0 {
                case .operation: false
                case .group(let group): group.isEmpty
                }
            }
        }

        /// Removes the operations whose target is `target` (or whose target is gone), and groups left empty.
        func remove(target: AnyObject) {
            entries.removeAll {
                switch $0 {
                case .operation(let operation):
                    guard let owner = operation.target else { return true }
                    return owner === target
                case .group(let group):
                    group.remove(target: target)
                    return group.isEmpty
                }
            }
        }
    }

    private var undoStack: [Group] = []
    private var redoStack: [Group] = []
    /// The groups open now, outermost first.
    private var openGroups: [Group] = []
    /// Where registrations go while an undo or redo runs: the group that will be pushed on the other stack.
    private var collecting: Group?
    private var disabledCount = 0
    /// Contexts (and other owners) told at each checkpoint, so that they register what they have not yet.
    private var checkpointObservers: [ObjectIdentifier: (owner: Weak, body: () -> Void)] = [:]

    private struct Weak {
        weak var object: AnyObject?
    }

    /// Whether an undo is running.
    public private(set) var isUndoing = false
    /// Whether a redo is running.
    public private(set) var isRedoing = false
    /// Whether a registration made while no group is open opens one (see the type's description for when it closes).
    open var groupsByEvent = true
    /// The number of groups kept on the undo stack; 0 (the default) keeps them all.
    ///
    /// Older groups are dropped first.
    open var levelsOfUndo = 0 {
        didSet {
            levelsOfUndo = max(0, levelsOfUndo)
            trim(&undoStack)
            trim(&redoStack)
        }
    }

    /// An undo manager with empty stacks, grouping by event.
    public init() {}

    // MARK: Registering

    /// Registers `handler` to undo an operation on `target`: undoing calls it with `target`, unless `target` is gone.
    ///
    /// Registered while undoing, it goes to the redo stack; while redoing, to the undo stack; otherwise to the undo
    /// stack, clearing the redo stack. Nothing is registered while registration is disabled.
    open func registerUndo<TargetType: AnyObject>(withTarget target: TargetType, handler: @escaping (TargetType) -> Void) {
        guard isUndoRegistrationEnabled else { return }
        let operation = Operation(target: target) { object in
            if let typed = object as? TargetType { handler(typed) }
        }
        if let collecting {
            collecting.entries.append(.operation(operation))
            return
        }
        redoStack.removeAll()
        if openGroups.isEmpty { open(Group(isAutomatic: true)) }
        openGroups[openGroups.count - 1].entries.append(.operation(operation))
    }

    /// Whether registrations are recorded (they are unless disabled more often than enabled).
    open var isUndoRegistrationEnabled: Bool { disabledCount == 0 }

    /// Stops recording registrations until a matching `enableUndoRegistration()`; calls nest.
    open func disableUndoRegistration() { disabledCount += 1 }

    /// Undoes one `disableUndoRegistration()`.
    open func enableUndoRegistration() { disabledCount = max(0, disabledCount - 1) }

    // MARK: Grouping

    /// The number of groups open now (0 when none is).
    open var groupingLevel: Int { openGroups.count }

    /// Opens a group, nested in the open one if there is one: everything registered until the matching
    /// `endUndoGrouping()` is undone as one step.
    open func beginUndoGrouping() {
        if !openGroups.isEmpty { checkpoint() }
        open(Group(isAutomatic: false))
    }

    /// Closes the innermost open group (nothing happens if none is open).
    open func endUndoGrouping() {
        guard !openGroups.isEmpty else { return }
        checkpoint()
        closeInnermostGroup()
    }

    private func open(_ group: Group) {
        openGroups.append(group)
        post(.NSUndoManagerDidOpenUndoGroup)
    }

    private func closeInnermostGroup() {
        post(.NSUndoManagerWillCloseUndoGroup)
        let group = openGroups.removeLast()
        if !group.isEmpty {
            if let parent = openGroups.last {
                parent.entries.append(.group(group))
            } else {
                push(group, onto: &undoStack)
            }
        }
        post(.NSUndoManagerDidCloseUndoGroup)
    }

    /// Closes the group a registration opened (`groupsByEvent`) if it is the only one open: called by a context when
    /// it has processed its pending changes, the end of its event.
    package func endEvent() {
        guard collecting == nil, openGroups.count == 1, openGroups[0].isAutomatic else { return }
        closeInnermostGroup()
    }

    // MARK: Undoing and redoing

    /// Whether there is something to undo (an open group with registrations counts).
    open var canUndo: Bool {
        checkpoint()
        return !undoStack.isEmpty || openGroups.contains { !$0.isEmpty }
    }

    /// Whether there is something to redo.
    open var canRedo: Bool {
        checkpoint()
        return !redoStack.isEmpty
    }

    /// Closes the top-level group if it is the only one open, then undoes the last group (see `undoNestedGroup()`).
    ///
    /// Nothing happens while more than one group is open or while an undo or redo runs.
    open func undo() {
        guard collecting == nil else { return }
        checkpoint()
        if openGroups.count == 1 { closeInnermostGroup() }
        guard openGroups.isEmpty else { return }
        undoNestedGroup()
    }

    /// Undoes the last group: the last one closed in the open group if a group is open, else the one on top of the undo
    /// stack.
    ///
    /// What its operations register goes to the redo stack as one group with the same action name.
    open func undoNestedGroup() {
        guard collecting == nil else { return }
        checkpoint()
        let group: Group
        if let open = openGroups.last {
            guard let index = open.entries.lastIndex(where: { if case .group = $0 { true } else { false } }),
                case .group(let nested) = open.entries.remove(at: index)
            else { return }
            group = nested
        } else {
            guard let last = undoStack.popLast() else { return }
            group = last
        }
        replay(group, undoing: true)
    }

    /// Redoes the last undone group; what its operations register goes back on the undo stack.
    ///
    /// Nothing happens while a group is open (other than one `groupsByEvent` opened, which is closed first) or while an
    /// undo or redo runs.
    open func redo() {
        guard collecting == nil else { return }
        checkpoint()
        if openGroups.count == 1, openGroups[0].isAutomatic { closeInnermostGroup() }
        guard openGroups.isEmpty, let group = redoStack.popLast() else { return }
        replay(group, undoing: false)
    }

    /// Undoes or redoes `group`, between the will- and did-change notifications, and pushes what its operations
    /// registered on the other stack.
    private func replay(_ group: Group, undoing: Bool) {
        post(undoing ? .NSUndoManagerWillUndoChange : .NSUndoManagerWillRedoChange)
        let inverse = run(group, undoing: undoing)
        if undoing { push(inverse, onto: &redoStack) } else { push(inverse, onto: &undoStack) }
        post(undoing ? .NSUndoManagerDidUndoChange : .NSUndoManagerDidRedoChange)
    }

    /// Runs a group's operations newest first (nested groups too), collecting what they register.
    private func run(_ group: Group, undoing: Bool) -> Group {
        let inverse = Group(isAutomatic: false)
        inverse.actionName = group.actionName
        inverse.isDiscardable = group.isDiscardable
        collecting = inverse
        if undoing { isUndoing = true } else { isRedoing = true }
        defer {
            collecting = nil
            isUndoing = false
            isRedoing = false
        }
        func perform(_ entries: [Entry]) {
            for entry in entries.reversed() {
                switch entry {
                case .operation(let operation): if let target = operation.target { operation.run(target) }
                case .group(let nested): perform(nested.entries)
                }
            }
        }
        perform(group.entries)
        return inverse
    }

    // MARK: Clearing

    /// Clears both stacks and the open groups, and enables registration again.
    open func removeAllActions() {
        undoStack.removeAll()
        redoStack.removeAll()
        openGroups.removeAll()
        disabledCount = 0
    }

    /// Removes the operations registered with `target` from both stacks (and the groups they leave empty).
    open func removeAllActions(withTarget target: AnyObject) {
        for group in undoStack + redoStack + openGroups { group.remove(target: target) }
        undoStack.removeAll { $0.isEmpty }
        redoStack.removeAll { $0.isEmpty }
    }

    // MARK: Action names

    /// The group that is being built: the one collecting an undo's or redo's registrations, else the innermost open
    /// one, else the last one closed.
    private var currentGroup: Group? { collecting ?? openGroups.last ?? undoStack.last }

    /// The group `undo()` would undo: the open top-level group if it has registrations, else the last one closed.
    private var groupToUndo: Group? { openGroups.first.flatMap { $0.isEmpty ? nil : $0 } ?? undoStack.last }

    /// Names the group being built (for menus: "Undo Typing").
    open func setActionName(_ actionName: String) { currentGroup?.actionName = actionName }

    /// The name of the group `undo()` would undo ("" when it has none).
    open var undoActionName: String { groupToUndo?.actionName ?? "" }

    /// The name of the group `redo()` would redo ("" when it has none).
    open var redoActionName: String { redoStack.last?.actionName ?? "" }

    /// "Undo", followed by the undo action name if there is one.
    open var undoMenuItemTitle: String { undoMenuTitle(forUndoActionName: undoActionName) }

    /// "Redo", followed by the redo action name if there is one.
    open var redoMenuItemTitle: String { redoMenuTitle(forUndoActionName: redoActionName) }

    /// "Undo" followed by `actionName`, or "Undo" alone for an empty name.
    open func undoMenuTitle(forUndoActionName actionName: String) -> String {
        actionName.isEmpty ? "Undo" : "Undo \(actionName)"
    }

    /// "Redo" followed by `actionName`, or "Redo" alone for an empty name.
    open func redoMenuTitle(forUndoActionName actionName: String) -> String {
        actionName.isEmpty ? "Redo" : "Redo \(actionName)"
    }

    /// Marks the group being built as discardable (an operation that changes nothing a document saves).
    open func setActionIsDiscardable(_ discardable: Bool) { currentGroup?.isDiscardable = discardable }

    /// Whether the group `undo()` would undo is discardable.
    open var undoActionIsDiscardable: Bool { groupToUndo?.isDiscardable ?? false }

    /// Whether the group `redo()` would redo is discardable.
    open var redoActionIsDiscardable: Bool { redoStack.last?.isDiscardable ?? false }

    // MARK: Checkpoints

    /// Asks `owner` to run `body` at each checkpoint (opening a nested group, closing a group, undo, redo, `canUndo`,
    /// `canRedo`) while `owner` lives: a context registers the changes it has not processed yet, as Core Data's does
    /// when it sees `NSUndoManagerCheckpoint`.
    package func observeCheckpoints(of owner: AnyObject, _ body: @escaping () -> Void) {
        checkpointObservers[ObjectIdentifier(owner)] = (Weak(object: owner), body)
    }

    /// Stops telling `owner` of checkpoints.
    package func stopObservingCheckpoints(of owner: AnyObject) {
        checkpointObservers[ObjectIdentifier(owner)] = nil
    }

    private func checkpoint() {
        guard collecting == nil else { return }
        checkpointObservers = checkpointObservers.filter { $0.value.owner.object != nil }
        for (_, observer) in checkpointObservers { observer.body() }
        post(.NSUndoManagerCheckpoint)
    }

    /// Puts a group that holds something on top of `stack`, dropping the oldest beyond `levelsOfUndo`.
    private func push(_ group: Group, onto stack: inout [Group]) {
        guard !group.isEmpty else { return }
        stack.append(group)
        trim(&stack)
    }

    private func trim(_ stack: inout [Group]) {
        if levelsOfUndo > 0, stack.count > levelsOfUndo { stack.removeFirst(stack.count - levelsOfUndo) }
    }

    private func post(_ name: Notification.Name) {
        NotificationCenter.default.post(name: name, object: self)
    }
}

extension UndoManager {
    /// Posted when an undo manager reaches a checkpoint (a group opened or closed, before an undo or redo).
    public static let checkpointNotification = Notification.Name.NSUndoManagerCheckpoint
    /// Posted before an undo manager undoes a group.
    public static let willUndoChangeNotification = Notification.Name.NSUndoManagerWillUndoChange
    /// Posted after an undo manager undid a group.
    public static let didUndoChangeNotification = Notification.Name.NSUndoManagerDidUndoChange
    /// Posted before an undo manager redoes a group.
    public static let willRedoChangeNotification = Notification.Name.NSUndoManagerWillRedoChange
    /// Posted after an undo manager redid a group.
    public static let didRedoChangeNotification = Notification.Name.NSUndoManagerDidRedoChange
    /// Posted when an undo manager opens a group.
    public static let didOpenUndoGroupNotification = Notification.Name.NSUndoManagerDidOpenUndoGroup
    /// Posted before an undo manager closes a group.
    public static let willCloseUndoGroupNotification = Notification.Name.NSUndoManagerWillCloseUndoGroup
    /// Posted after an undo manager closed a group.
    public static let didCloseUndoGroupNotification = Notification.Name.NSUndoManagerDidCloseUndoGroup
}

extension Notification.Name {
    /// Posted by an `UndoManager` at a checkpoint; Foundation's name.
    public static let NSUndoManagerCheckpoint = Notification.Name("NSUndoManagerCheckpointNotification")
    /// Posted by an `UndoManager` before it undoes a group; Foundation's name.
    public static let NSUndoManagerWillUndoChange = Notification.Name("NSUndoManagerWillUndoChangeNotification")
    /// Posted by an `UndoManager` after it undid a group; Foundation's name.
    public static let NSUndoManagerDidUndoChange = Notification.Name("NSUndoManagerDidUndoChangeNotification")
    /// Posted by an `UndoManager` before it redoes a group; Foundation's name.
    public static let NSUndoManagerWillRedoChange = Notification.Name("NSUndoManagerWillRedoChangeNotification")
    /// Posted by an `UndoManager` after it redid a group; Foundation's name.
    public static let NSUndoManagerDidRedoChange = Notification.Name("NSUndoManagerDidRedoChangeNotification")
    /// Posted by an `UndoManager` when it opens a group; Foundation's name.
    public static let NSUndoManagerDidOpenUndoGroup = Notification.Name("NSUndoManagerDidOpenUndoGroupNotification")
    /// Posted by an `UndoManager` before it closes a group; Foundation's name.
    public static let NSUndoManagerWillCloseUndoGroup = Notification.Name("NSUndoManagerWillCloseUndoGroupNotification")
    /// Posted by an `UndoManager` after it closed a group; Foundation's name.
    public static let NSUndoManagerDidCloseUndoGroup = Notification.Name("NSUndoManagerDidCloseUndoGroupNotification")
}
