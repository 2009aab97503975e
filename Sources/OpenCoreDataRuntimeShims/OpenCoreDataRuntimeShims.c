// Declarations only (see include/OpenCoreDataRuntimeShims.h): the functions are the Swift runtime's.
#include "OpenCoreDataRuntimeShims.h"
