#ifndef OPENCOREDATA_RUNTIME_SHIMS_H
#define OPENCOREDATA_RUNTIME_SHIMS_H

/// The Swift runtime's own "retain unless deinitializing" (exported by libswiftCore on every platform, C calling
/// convention; the runtime's weak references are built on it).
///
/// Adds one strong reference and returns the object when its strong count has not reached zero; returns NULL, and
/// leaves the object alone, once its `deinit` has begun. The context's registry holds stored objects without a
/// reference and uses this to hand out only objects that are not already dying on another thread.
void *_Nullable swift_tryRetain(void *_Nonnull object);

/// The Swift runtime's unowned references: one more (or one fewer) on `object`, which keeps its memory, not the object
/// itself, alive (exported by libswiftCore, C calling convention; `unowned` variables are built on them).
///
/// With one held, `swift_tryRetain` may be called on the object at any time: its memory stays until the last unowned
/// reference goes, and the call fails once its `deinit` has begun. A model's row remembers its model this way, where a
/// weak reference would give every model a side table of its own.
void *_Nonnull swift_unownedRetain(void *_Nonnull object);
void swift_unownedRelease(void *_Nonnull object);

#endif
