// kiln::nn module (to be written).
#pragma once
