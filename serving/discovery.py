"""(issue 30)"""
