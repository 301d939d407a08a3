// Status and Result<T> live in the public client header surge/status.h, so
// libsurge's installed headers stand alone; the rest of the tree keeps
// including common/status.h, which is that one type and nothing more.
#pragma once

#include "surge/status.h"
