package compilecheck_test

import (
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/compilecheck"
)

// TestSuite checks the helper on statements whose fate is known: a string
// given for an int fails, on its own lines, and the rest compiles.
func TestSuite(t *testing.T) {
	t.Parallel()
	compilecheck.Suite{
		Imports: []string{"strconv"},
		Params:  "n int",
		Misplaced: map[string]string{
			"StringForInt":  `var i int = "x"; _ = i`,
			"OverTwoLines":  "_ = strconv.Itoa(\n\t\"x\")",
			"WrongArgument": `_ = strconv.Itoa(1.5)`,
		},
		Placed: map[string]string{
			"Itoa":         `_ = strconv.Itoa(n)`,
			"OverTwoLines": "_ = strconv.Itoa(\n\tn)",
		},
	}.Run(t)
}
