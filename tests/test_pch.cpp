// The translation unit that builds tests/test_pch.hpp's precompiled header (target kagent_test_pch).
