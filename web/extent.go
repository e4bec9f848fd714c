package web

import (
	"unicode/utf8"

	"github.com/postern/postern/policy"
)

// cardExtent is policy.ExtentOf(text) with what lies beyond the command
// box's first view measured as the box shows the text: policy.Visible's
// escapes (a control byte is the 6 to 8 columns of <U+0001>), tabs to the
// next multiple of 8 columns, and any other non-ASCII character as 2
// columns (a wide one takes 2; counting more than a character takes only
// makes the marker show sooner). policy.ExtentOf counts bytes, so `true`,
// lines of tabs and a `touch` on the 12th line, or lines of escaped control
// bytes, fitted its 12 lines of 80 columns while the box hid the end with
// no marker. The box is at least PreviewColumns columns wide (site.css), so
// a text this says fits does fit.
func cardExtent(text string) policy.Extent {
	e := policy.ExtentOf(text)
	e.MoreLines, e.MoreBytes = 0, 0
	row, col, line := 1, 0, 0
	// place puts a unit of w columns on the current row or, when it does
	// not fit, at the start of the next one; false once that is past the
	// box's first view.
	place := func(w int) bool {
		if col+w > policy.PreviewColumns && col > 0 {
			row, col = row+1, 0
		}
		col += w
		return row <= policy.PreviewLines
	}
	for off := 0; off < len(text); {
		r, size := utf8.DecodeRuneInString(text[off:])
		if r == '\n' {
			row, col, line = row+1, 0, line+1
			if row > policy.PreviewLines {
				e.MoreLines, e.MoreBytes = e.Lines-line, len(text)-off-1
				return e
			}
			off += size
			continue
		}
		var units []int
		switch shown := policy.Visible(text[off : off+size]); {
		case r == '\t':
			units = []int{8 - col%8}
		case shown != text[off:off+size] || r == utf8.RuneError && size <= 1:
			// An escape such as <U+202E>, which wraps like any text.
			for range shown {
				units = append(units, 1)
			}
		case r < utf8.RuneSelf:
			units = []int{1}
		default:
			units = []int{2}
		}
		for _, w := range units {
			if !place(w) {
				// This line is shown in part: the rest of it, and every
				// line after it, lies beyond.
				e.MoreLines, e.MoreBytes = e.Lines-line-1, len(text)-off
				return e
			}
		}
		off += size
	}
	return e
}
