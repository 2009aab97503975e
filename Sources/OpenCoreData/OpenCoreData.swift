// The umbrella module: `import OpenCoreData` brings in every public layer.
@_exported import OpenCoreDataChanges
@_exported import OpenCoreDataContext
@_exported import OpenCoreDataFetchedResults
@_exported import OpenCoreDataModel
@_exported import OpenCoreDataPredicate
@_exported import OpenCoreDataStore
