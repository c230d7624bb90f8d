"""How a state is shown, as Rich style strings. Colour is only a hint: each style must stay
readable when the colour is gone. Under NO_COLOR Textual turns every colour into a grey of
the same brightness, and red becomes a dark grey (#3b3b3b) on the near-black background, so a
bad state is shown in reverse video, black on light red: under NO_COLOR that is black on a
mid grey (contrast 6.4), on a colour terminal (16 colours too) black on red, and where the
terminal's own colours are kept and only stripped, plain reverse video. Warnings stay bold
yellow, which keeps its brightness as a grey; nothing a user must read is dim.
"""

from __future__ import annotations

ALERT = "bold reverse #ff7070 on #000000"  # an error, a damaged, missing or unsafe part, BROKEN
WARN = "bold yellow"
GOOD = "bold green"
