import OpenCoreDataModel
import Testing
import _TestSupport

/// One walk of the model for key paths: relationships passed through, the property at the end, operators, errors.
@Suite struct KeyPathResolutionTests {
    @Test func keyPathsResolveThroughRelationships() throws {
        let model = try makeCompanyModel()
        let employee = try #require(model.entitiesByName["Employee"])
        let name = try employee.resolveKeyPath("department.head.name")
        #expect(name.relationships.map(\.name) == ["department", "head"])
        #expect(name.attribute?.name == "name" && !name.throughToMany && name.collectionOperator == nil)
        let projects = try employee.resolveKeyPath("projects.title")
        #expect(projects.throughToMany && projects.attribute?.attributeType == .stringAttributeType)
        let count = try employee.resolveKeyPath("mentees.@count")
        #expect(count.relationships.map(\.name) == ["mentees"] && count.collectionOperator?.name == "@count")
        let sum = try employee.resolveKeyPath("department.employees.@sum.salary")
        #expect(sum.collectionOperator?.rest == "salary" && sum.property == nil)
        let toOne = try employee.resolveKeyPath("department")
        #expect(toOne.property?.name == "department" && toOne.attribute == nil)
    }

    @Test(arguments: [
        ("department.nope", "Entity 'Department' has no property 'nope' (in key path 'department.nope')."),
        ("salry", "Entity 'Employee' has no property 'salry'."),
        ("name.first", "'Employee.name' is an attribute, so key path 'name.first' cannot go further."),
        ("mentees.@median", "Unknown collection operator '@median' in key path 'mentees.@median'"),
    ])
    func badKeyPathsNameTheComponent(_ keyPath: String, _ message: String) throws {
        let employee = try #require(try makeCompanyModel().entitiesByName["Employee"])
        let error = #expect(throws: CoreDataError.self) { try employee.resolveKeyPath(keyPath) }
        #expect(error?.code == .unknownKey && error?.message.hasPrefix(message) == true, "\(String(describing: error))")
    }
}
