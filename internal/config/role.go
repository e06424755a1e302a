package config

// Role is what an API token may do. Roles are ordered: an admin may do
// everything an operator may, and an operator everything a viewer may.
type Role string

// The roles, from least to most.
const (
	// RoleViewer reads: every GET, the event stream and the audit trail.
	RoleViewer Role = "viewer"
	// RoleOperator also starts, stops, verifies and repairs backfills,
	// changes their rate and submits, stops and re-runs batch work.
	RoleOperator Role = "operator"
	// RoleAdmin also pauses, resumes and resets streams and starts
	// backfills with a row filter or a column subset.
	RoleAdmin Role = "admin"
)

// DefaultEnvTokenRole is the role of TIDEMARK_API_TOKEN's token when
// TIDEMARK_API_TOKEN_ROLE is unset. Whoever sets the daemon's environment
// already controls its configuration (its streams, filters and tasks), so
// the token that environment adds may do what the configuration may.
const DefaultEnvTokenRole = RoleAdmin

// Roles lists the roles from least to most.
var Roles = []Role{RoleViewer, RoleOperator, RoleAdmin}

func (r Role) rank() int {
	for i, x := range Roles {
		if x == r {
			return i + 1
		}
	}
	return 0
}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return r.rank() > 0 }

// Allows reports whether r may do what needs the role need. An invalid role
// allows nothing.
func (r Role) Allows(need Role) bool { return r.Valid() && need.Valid() && r.rank() >= need.rank() }
