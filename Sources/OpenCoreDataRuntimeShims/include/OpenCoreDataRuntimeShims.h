#ifndef OPENCOREDATA_RUNTIME_SHIMS_H
#define OPENCOREDATA_RUNTIME_SHIMS_H

/// The Swift runtime's own "retain unless deinitializing" (exported by libswiftCore on every platform, C calling
/// convention; the runtime's weak references are built on it).
///
/// Adds one strong reference and returns the object when its strong count has not reached zero; returns NULL, and
/// leaves the object alone, once its `deinit` has begun. The context's registry holds stored objects without a
/// reference and uses this to hand out only objects that are not already dying on another thread.
void *_Nullable swift_tryRetain(void *_Nonnull object);

#endif
