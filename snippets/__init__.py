"""Tested code behind every page of the GPU Field Guide."""
