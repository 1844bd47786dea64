// <curses.h> for corral console, without its function-like macros (move, erase, clear,
// timeout...), which would otherwise rewrite those names in every file compiled after it in a
// unity build.
#pragma once

#ifndef NCURSES_NOMACROS
#define NCURSES_NOMACROS 1
#endif
#include <curses.h>
