public import class OpenCoreDataModel.NSSecureUnarchiveFromDataTransformer
public import struct OpenCoreDataModel.NSValueTransformerName
public import class OpenCoreDataModel.ValueTransformer

// Foundation's value transformers, which `@Attribute(.transformable(by:))` names: Linux's Foundation has none, so
// OpenCoreData's stand in (the same names, so that a SwiftData file's transformer compiles unchanged).

/// Converts values to other values (for a transformable attribute: to and from the bytes stored): Foundation's class,
/// as OpenCoreData provides it.
public typealias ValueTransformer = OpenCoreDataModel.ValueTransformer

/// The name a value transformer is registered under.
public typealias NSValueTransformerName = OpenCoreDataModel.NSValueTransformerName

/// The transformer that archives values with `NSKeyedArchiver`'s secure coding: subclass it to allow your classes.
public typealias NSSecureUnarchiveFromDataTransformer = OpenCoreDataModel.NSSecureUnarchiveFromDataTransformer
