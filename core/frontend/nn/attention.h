// kiln::nn attention (to be written).
#pragma once
