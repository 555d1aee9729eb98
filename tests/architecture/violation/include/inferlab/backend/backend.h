// The backend interface (a header for the include check).
#pragma once
