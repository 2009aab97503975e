// Model subclasses, as SwiftData allows them from iOS 26 (written for this project in the style of Apple's trip
// samples, not copied): an outing, and business and personal outings that add properties of their own.
import Foundation
import OpenSwiftData

@Model
class Outing {
    #Unique<Outing>([\.name, \.startDate])
    #Index<Outing>([\.name], [\.startDate])

    var name: String
    var destination: String
    var startDate: Date
    @Relationship(deleteRule: .cascade, inverse: \Waypoint.outing) var waypoints: [Waypoint] = []

    init(name: String, destination: String, startDate: Date = Date(timeIntervalSinceReferenceDate: 0)) {
        self.name = name
        self.destination = destination
        self.startDate = startDate
    }

    var summary: String { "\(name) to \(destination)" }
}

@available(macOS 26, iOS 26, *)
@Model
final class BusinessOuting: Outing {
    var perDiem: Double = 0
    var company: String

    init(name: String, destination: String, company: String, perDiem: Double) {
        self.company = company
        self.perDiem = perDiem
        super.init(name: name, destination: destination)
    }
}

enum OutingReason: String, Codable, CaseIterable {
    case family, vacation, other
}

@available(macOS 26, iOS 26, *)
@Model
final class PersonalOuting: Outing {
    var reason: OutingReason

    init(name: String, destination: String, reason: OutingReason) {
        self.reason = reason
        super.init(name: name, destination: destination)
    }
}

@Model
final class Waypoint {
    var place: String
    var outing: Outing?
    init(place: String) { self.place = place }
}
